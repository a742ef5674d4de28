"""The grading job's protocol between the parent and its worker: the job folder, its files, and the events.

The parent (run by grading.py) writes a job folder `<course>/.grading/<lesson>/<student>/` and asks a
warm zygote (zygote.py) to fork a worker (worker.py) that grades it. The folder is the whole
protocol; each file has one writer, and `JobFolder` is the only place their names are spelled:

| file          | written by             | holds                                                         |
|---------------|------------------------|---------------------------------------------------------------|
| `job.json`    | parent, before         | the `Job`: course, lesson, student, shard gradebook URL,      |
|               |                        | limits (the only copy), the sandbox's features                |
| `gradebook.db`| parent, then nbgrader  | a private copy of the course gradebook (the shard)            |
| `events.txt`  | worker (`event`)       | one `Finding` record per line, {"kind", "text", "cell"}: what |
|               |                        | happened (EVENT_KINDS), what was restored included; the parent|
|               |                        | reads them (`read_events`) and flags the kinds in FLAGGED     |
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
        self.hung_events = self.path / "events-hung.txt"  # the first run's events, when a hang had it graded again

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
    "tamper": "a cell's nbgrader metadata was changed: restored as released before grading",
    "structure": "a released test cell is missing from the graded copy (it scores zero)",
    "grader": "the grader could not run a test cell: its verdict is withheld for review",
    STARVED: "a cell timed out while the machine was too busy to run the kernel: graded again once, after the others",
}
FLAGGED = ("runtime", "integrity", "grader", "tamper", "structure")  # the kinds a reviewer must see
MAX_PENDING = 2  # pending test cells a grader fault may leave in one submission; more is flagged `pending`
FLAG_KINDS = {  # every kind of flag, what it means for the reviewer (flags/ makes the static ones)
    **{kind: EVENT_KINDS[kind] for kind in FLAGGED},
    "patch": "the student's code changes numpy, torch, builtins or course_utils (a check the tests rely on)",
    "eq": "a class whose __eq__ always returns True",
    "lie": "a subclass of float, int, Tensor or ndarray that redefines how it compares or converts",
    "helper": "the student's code redefines a name the tests use",
    "reach": "the student's code names the grader's files (gradebook, solutions, hidden tests)",
    "introspect": "the student's code reads the running cell's source, the call stack or IPython's history",
    "escape": "the student's code runs work where a test's watch does not reach (threads, processes, ctypes)",
    "kernel": "the student's code reaches the kernel's own machinery (display hook, output formatters, IPython's "
              "events, audit hooks, the built-ins table, transformers, tracebacks)",
    "size": "the notebook was trimmed before grading (outputs or cells past the limits); the original is kept",
    "invalid": "the notebook could not be read: not graded, entered with zero",
    "grading": "grading failed (the grader's fault or a dead worker): entered with zero, grade it again",
    "pending": f"more than {MAX_PENDING} test cells left for manual grading: more than a fault of the grader's explains "
               "(what the submission ran may have caused them); review the submission before grading them by hand",
}
MAX_EVENT_CHARS = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


class Finding(str):
    """One thing grading found, an event the worker wrote or a flag for review: its `kind`, its `text` and the
    `cell` (a grade id) it is about, or None. A str that reads "<kind>: <text>", the flag's one line; written and
    read as a record ({"kind", "text", "cell"}), so every reader chooses by kind and cell, never by the words."""

    def __new__(cls, kind, text, cell=None):
        self = super().__new__(cls, f"{kind}: {text}")
        self.kind, self.text, self.cell = kind, text, cell
        return self

    def __reduce__(self):  # pickled with its fields (an outcome travels back from a Dask worker)
        return Finding, (self.kind, self.text, self.cell)

    def record(self):
        return {"kind": self.kind, "text": self.text, "cell": self.cell}

    @classmethod
    def from_record(cls, record):
        """The Finding of a record, or None when it is not one (a file is read back as data, never trusted)."""
        if type(record) is not dict or type(record.get("kind")) is not str or type(record.get("text")) is not str \
                or type(record.get("cell")) not in (str, type(None)):
            return None
        return cls(clean(record["kind"]), clean(record["text"]), record.get("cell") and clean(record["cell"]))


def findings(records):
    """[Finding] of a report's list of records (its flags or events); what is not one is dropped. A report written
    before findings were records holds each flag's line, "<kind>: <text>"."""
    legacy = lambda r: dict(zip(("kind", "text"), r.split(": ", 1))) if type(r) is str and ": " in r else r  # noqa: E731
    return [f for f in (Finding.from_record(legacy(r)) for r in (records if type(records) is list else [])) if f]


def as_flag(found):
    """The review flag of an event of a FLAGGED kind ('runtime' adds that later cells did not run)."""
    return Finding(found.kind, found.text + (" (later cells not run)" if found.kind == "runtime" else ""), found.cell)


def clean(text):
    """Text that may hold kernel-chosen words, made safe for one event: no control characters, capped."""
    text = _CONTROL.sub(" ", str(text)).strip()
    return text if len(text) <= MAX_EVENT_CHARS else text[:MAX_EVENT_CHARS - 3] + "..."


def event(kind, text, cell=None):
    """Append one event record for the parent (a no-op outside a grading job); cell: the grade id it is about."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}: one of {sorted(EVENT_KINDS)}")
    path = os.environ.get(EVENTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(Finding(kind, clean(text), cell and clean(cell)).record()) + "\n")


def read_events(path):
    """[Finding] from an events file; a line that is not a well-formed record of an event's kind is skipped."""
    path = Path(path)
    found = []
    for line in (path.read_text(errors="replace").splitlines() if path.is_file() else []):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        finding = Finding.from_record(record)
        if finding is not None and finding.kind in EVENT_KINDS:
            found.append(finding)
    return found


def record_kernel(km):
    """Note the kernel's process id beside the events, so that the parent can stop it on Ctrl-C."""
    folder = JobFolder.current()
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    if folder and pid:
        with open(folder.kernels, "a") as f:
            f.write(f"{pid}\n")


def pending_flags(pending):
    """[the `pending` flag] when more test cells were left for manual grading than a grader fault explains, else []:
    a student must not be able to send every failed cell to the instructor's manual queue unseen."""
    if len(pending) <= MAX_PENDING:
        return []
    return [Finding("pending", f"{len(pending)} test cells left for manual grading: {', '.join(pending)[:300]}")]
