"""The kernel boundary: every way the grader and a student's kernel reach each other, one module a job.

The face (nothing else is imported from outside kernel/; tests/autograder/test_modules.py checks): `open_boundary`
opens a started kernel for the lesson's tests, and `Boundary.run_test(grade_id)` returns a test cell's `Verdict`
(PASSED, FAILED, TIMED_OUT or WITHHELD; stdout, error, notes), decided in that one method; `outputs_for` writes it as
a cell's outputs; `GraderSideError` is what the grader's own failure raises; `lesson_modules` and `check_lesson`
serve the run's zygotes and the `check` command.

A test cell runs here, on the grader's side; each time it touches a student's object, a `Session` asks the kernel.
Read in this order:

- `boundary`: the kernel opened for one notebook's tests, and each test's verdict.
- `verdicts`: a lesson's tests, run on the grader's side, with their set-up.
- `offline`: the `check` command: a solution's tests run the grader's way in this process, no kernel.
- `session`: one kernel's conversation: a request made, sent, its answer read and applied (errors by kind,
  meters, in-place changes, notes for review); it has a `lending.Lender`.
- `lending`: what a test defines stays here; the kernel gets stand-ins whose every use is a question back.
- `codec`: answers decoded strictly into plain values and `Remote` handles; requests checked readable.
- `transport`: one request over Jupyter (a silent execute, questions on stdin) or in this process.
- `wire`: the limits, allow-lists and errors of the boundary, in one place.
- `in_kernel/`: the grader's program in the student's kernel: one program in seven parts, each using only
  earlier ones, sent with every request (the integrity check sends its own, below).
- `integrity`: after each test cell, what the tests rely on in the kernel is compared with a baseline
  (a flag for review, never a score).
- `meter`: lesson 11's Triton launches run and counted in a process of the grader's, never in the kernel.
"""
import importlib

_FACE = {"open_boundary": "boundary", "Boundary": "boundary", "Verdict": "boundary", "PASSED": "boundary",
         "FAILED": "boundary", "TIMED_OUT": "boundary", "WITHHELD": "boundary", "outputs_for": "verdicts",
         "check_lesson": "offline", "GraderSideError": "wire"}
__all__ = sorted([*_FACE, "lesson_modules"])


def __getattr__(name):  # the face is read lazily: the kernel's side (in_kernel/) is imported without the grader's
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lesson_modules(source_nb):
    """The modules the set-up of a lesson's grader-side tests imports (a worker's zygote imports them once)."""
    from .verdicts import LessonTests
    return LessonTests(source_nb).modules()
