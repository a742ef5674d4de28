"""What grading found for one submission, one record, written and read here and nowhere else.

An `Outcome` is the report `<course>/reports/<lesson>/<student>.json` (course.SubmissionPaths.report): the run
(run/grading.py) writes it once per submission graded, found invalid or failed; the cluster carries it back from a
Dask worker as `record()`; the resume rule (`already_graded`), export's summary and the class report read it with
`read`. No reader parses the file its own way (otter-grader's GradingResults is the model: one typed record shared
by the producer and every consumer). The scores themselves are the gradebook's (gradebook.py); the outcome keeps
the run's copy of them beside what only grading knows: status, flags, events, pending cells, time, digest.

A leaf: the standard library, job.py (Finding) and files.py (write_atomic) only.
"""
import dataclasses
import hashlib
import json

from .files import write_atomic
from .job import findings

GRADED, FAILED, INVALID = "graded", "failed", "invalid"


@dataclasses.dataclass
class Outcome:
    """What grading found for one submission (docs/design.md, "What grading found")."""
    lesson: str
    student: str
    status: str = GRADED       # GRADED; FAILED: the grader's fault or a dead worker (zero, graded again by the next
    #                            run); INVALID: the notebook could not be read (zero)
    score: float = 0.0         # the gradebook's score after grading (a pending cell counts 0 there)
    max_score: float = 0.0
    seconds: float = 0.0       # grading's wall time
    flags: list = dataclasses.field(default_factory=list)    # [job.Finding] for review
    events: list = dataclasses.field(default_factory=list)   # [job.Finding] the worker wrote (job.EVENT_KINDS)
    error: str = ""            # why it failed or is invalid
    submission: str = ""       # digest() of the notebook graded: the next run skips it while it is unchanged
    pending: list = dataclasses.field(default_factory=list)  # grade ids of test cells left for manual grading

    def record(self):
        """The outcome as JSON data: its findings as records."""
        return {**dataclasses.asdict(self), "flags": [f.record() for f in self.flags],
                "events": [e.record() for e in self.events]}

    @classmethod
    def from_record(cls, record):
        """The Outcome of a record() (a file is read back as data, never trusted): a field missing or of the wrong
        type is its default, a finding that is not a well-formed record is dropped. ValueError when `record` is no
        record of one submission."""
        if type(record) is not dict or type(record.get("lesson")) is not str or type(record.get("student")) is not str:
            raise ValueError("not the record of a submission's outcome")
        kept = {}
        for field in dataclasses.fields(cls)[2:]:
            default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            value = record.get(field.name, default)
            number = type(default) is float and type(value) is int
            kept[field.name] = float(value) if number else value if type(value) is type(default) else default
        kept["pending"] = [p for p in kept["pending"] if type(p) is str]
        return cls(record["lesson"], record["student"], **{**kept, "flags": findings(kept["flags"]),
                                                           "events": findings(kept["events"])})


def digest(paths):
    """sha256 of the submitted notebook (course.SubmissionPaths.submitted; empty when absent)."""
    return hashlib.sha256(paths.submitted.read_bytes()).hexdigest() if paths.submitted.exists() else ""


def read(paths):
    """The Outcome of a submission (its course.SubmissionPaths), or None when it has no readable report."""
    try:
        return Outcome.from_record(json.loads(paths.report.read_text()))
    except (OSError, ValueError):
        return None


def write(paths, outcome):
    """Write a submission's report: whole or not at all (files.write_atomic)."""
    write_atomic(paths.report, json.dumps(outcome.record(), indent=1).encode())


def already_graded(paths):
    """True when the report says this very notebook was graded (or found invalid); a failed grading is retried."""
    found = read(paths)
    return found is not None and found.status != FAILED and found.submission == digest(paths)
