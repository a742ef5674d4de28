"""The grading worker: one submission, in a process of its own, and the protocol it speaks with the parent.

The parent (grading.py) writes a job folder `<course>/.grading/<lesson>/<student>/` and asks a
warm zygote (zygote.py) to fork a worker that runs `main(job.json)`. The folder is the whole
protocol; each file has one writer:

| file          | written by             | holds                                                         |
|---------------|------------------------|---------------------------------------------------------------|
| `job.json`    | parent, before         | course, lesson, student, shard gradebook URL, limits, sandbox |
| `gradebook.db`| parent, then nbgrader  | a private copy of the course gradebook (the shard)            |
| `events.txt`  | worker (`event`)       | one JSON record per line, {"kind", "text"}: what happened     |
|               |                        | (EVENT_KINDS); the parent reads them with `read_events` and   |
|               |                        | turns the kinds in FLAGGED into flags                         |
| `kernels.txt` | worker (`record_kernel`)| the kernel's process group, so the parent can stop it        |
| `result.json` | worker, at the end     | {"success", "error", "log"} of nbgrader's autograde           |
| `worker.log`  | the worker's stdout    | kept for review when grading failed                           |

`AUTOGRADER_EVENTS` (set by the parent) names `events.txt`; without it (plain nbgrader) events
go nowhere. An event's text may quote what the kernel said (an exception's message, a replaced
function's name): it is stripped of control characters and capped (`clean`), and the parent
decides by the record's kind, never by its words, so no kernel text can forge or hide an event.
"""
import json
import os
import re
import sys
from pathlib import Path

HANG = "hang"  # a kernel that stopped answering (see work_retrying_a_hang)
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
    path = os.environ.get("AUTOGRADER_EVENTS")
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
    path = os.environ.get("AUTOGRADER_EVENTS")
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    if path and pid:
        with open(Path(path).with_name("kernels.txt"), "a") as f:
            f.write(f"{pid}\n")


def work(job):
    """Autograde one submission into the shard gradebook named in `job`."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from .settings import Limits, grading_config
    limits = Limits(**job["limits"])
    config = grading_config(job["course"], job["db_url"], limits, job["sandbox"])
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.autograde(job["lesson"], job["student"], force=True, create=True)
    return {"success": bool(result["success"]), "error": result.get("error") or "", "log": result.get("log") or ""}


def work_retrying_a_hang(job):
    """work(job); a kernel hang (a cell that never started) is graded again once in a fresh kernel,
    and a second one fails the job as the grader's fault: never a zero the student earned."""
    outcome = work(job)
    events = Path(os.environ.get("AUTOGRADER_EVENTS", os.devnull))
    hung = [e for e in read_events(events) if e.kind == HANG]
    if not hung:
        return outcome
    events.replace(events.with_name("events-hung.txt"))  # the first run's events, kept beside the report
    event(HANG, f"graded again in a fresh kernel after the first run's {hung[0]}")
    outcome = work(job)
    again = [e for e in read_events(events) if e.kind == HANG][1:]
    if again:
        return {"success": False, "log": outcome["log"], "error": f"the grader's fault, not the student's: "
                f"the kernel hung twice ({again[0]}); run grade again"}
    return outcome


def main(job_file):
    """The worker: grade the job in `job_file`, write result.json beside it."""
    job_file = Path(job_file)
    outcome = work_retrying_a_hang(json.loads(job_file.read_text()))
    (job_file.parent / "result.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
