"""The grading job's protocol between the parent and its worker: the job folder, its files, and the events.

The parent (run by grading.py) writes a job folder `<course>/.grading/<lesson>/<student>/` and asks a
warm zygote (zygote.py) to fork a worker (worker.py) that grades it. The folder is the whole
protocol; each file has one writer, and `JobFolder` is the only place their names are spelled:

| file          | written by             | holds                                                         |
|---------------|------------------------|---------------------------------------------------------------|
| `job.json`    | parent, before         | the `Job`: course, lesson, student, shard gradebook URL,      |
|               |                        | limits (the only copy), the sandbox's features                |
| `gradebook.db`| parent, then nbgrader  | a private copy of the course gradebook (the shard)            |
| `events.txt`  | worker (`event`)       | one JSON record per line, {"kind", "text"}: what happened     |
|               |                        | (EVENT_KINDS); the parent reads them with `read_events` and   |
|               |                        | turns the kinds in FLAGGED into flags                         |
| `kernels.txt` | worker (`record_kernel`)| the kernel's process group, so the parent can stop it        |
| `result.json` | worker, at the end     | {"success", "error", "log"} of nbgrader's autograde           |
| `worker.log`  | the worker's stdout    | kept for review when grading failed                           |

EVENTS_ENV (set by the parent, `JobFolder.environment`) names `events.txt`; without it (plain nbgrader)
events go nowhere. An event's text may quote what the kernel said (an exception's message, a replaced
function's name): it is stripped of control characters and capped (`clean`), and the parent decides by
the record's kind, never by its words, so no kernel text can forge or hide an event. A leaf: the standard
library only, so that the preprocessors in the worker and the parent both read it.
"""
import dataclasses
import json
import os
import re
from pathlib import Path


EVENTS_ENV = "AUTOGRADER_EVENTS"


class JobFolder:
    """The files of one job's folder (see the table above)."""

    def __init__(self, path):
        self.path = Path(path)
        self.job = self.path / "job.json"
        self.gradebook = self.path / "gradebook.db"
        self.events = self.path / "events.txt"
        self.kernels = self.path / "kernels.txt"
        self.result = self.path / "result.json"
        self.log = self.path / "worker.log"

    def environment(self):
        """The variables that tell the worker's code where this job's events go."""
        return {EVENTS_ENV: str(self.events)}

    @classmethod
    def current(cls):
        """The folder of the job this process grades (from EVENTS_ENV), or None outside a grading job."""
        events = os.environ.get(EVENTS_ENV)
        return cls(Path(events).parent) if events else None


@dataclasses.dataclass(frozen=True)
class Job:
    """One grading job, as the parent writes it to job.json and the worker reads it."""
    course: str          # the course directory, absolute
    lesson: str
    student: str
    gradebook_url: str   # the shard: a private copy of the course gradebook (JobFolder.gradebook)
    limits: dict         # sandbox/limits.py's Limits as a dict: the only copy of each limit
    sandbox: dict        # the sandbox's features as probed (policy.sandbox_settings) without the limits

    def to_json(self):
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text):
        record = json.loads(text)
        return cls(**{field.name: record[field.name] for field in dataclasses.fields(cls)})


HANG = "hang"  # a kernel that stopped answering (see worker.work_retrying_a_hang)
STARVED = "starved"  # a cell timed out while the kernel waited for a core (sandbox/clock.py): graded again once
EVENT_KINDS = {
    HANG: "a cell the kernel never started: graded again once in a fresh kernel",
    "runtime": "the kernel died, or the notebook ran past its budget: later cells not run",
    "timeout": "a cell ran past its limit",
    "output": "a cell's output was truncated",
    "integrity": "what the tests rely on changed in the kernel (a flag, never a score)",
    "grader": "the grader could not run a test cell: its verdict is withheld for review",
    STARVED: "a cell timed out while the machine was too busy to run the kernel: graded again once, after the others",
}
FLAGGED = ("runtime", "integrity", "grader")  # the kinds a reviewer must see
MAX_EVENT_CHARS = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


class Event(str):
    """One event: its text (a str, so it reads as before) and its `kind`, one of EVENT_KINDS."""

    def __new__(cls, kind, text):
        self = super().__new__(cls, text)
        self.kind = kind
        return self

    def __reduce__(self):  # pickled with its kind (a Result travels back from a Dask worker)
        return Event, (self.kind, str(self))


def clean(text):
    """Text that may hold kernel-chosen words, made safe for one event: no control characters, capped."""
    text = _CONTROL.sub(" ", str(text)).strip()
    return text if len(text) <= MAX_EVENT_CHARS else text[:MAX_EVENT_CHARS - 3] + "..."


def event(kind, text):
    """Append one event record for the parent (a no-op outside a grading job)."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}: one of {sorted(EVENT_KINDS)}")
    path = os.environ.get(EVENTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"kind": kind, "text": clean(text)}) + "\n")


def read_events(path):
    """[Event] from an events file; a line that is not a well-formed record is skipped."""
    path = Path(path)
    found = []
    for line in (path.read_text(errors="replace").splitlines() if path.is_file() else []):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if type(record) is dict and record.get("kind") in EVENT_KINDS and type(record.get("text")) is str:
            found.append(Event(record["kind"], clean(record["text"])))
    return found


def record_kernel(km):
    """Note the kernel's process id beside the events, so that the parent can stop it on Ctrl-C."""
    folder = JobFolder.current()
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    if folder and pid:
        with open(folder.kernels, "a") as f:
            f.write(f"{pid}\n")
