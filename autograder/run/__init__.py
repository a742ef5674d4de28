"""The grading run: a class of submissions graded, each in a worker of its own, into the course gradebook.

The public face is `grade` (returning an outcome.Outcome per submission), `GradingInterrupted`, `grade_cluster`
(the same on Dask) and `grading_config` (the nbgrader configuration a grading uses); everything outside this
package imports these names from here (tests/autograder/test_modules.py keeps it). A newcomer reads the modules in
this order:

- `grading`: the parent. Static flags, one job folder per submission (job.py), workers started and
  watched, their gradebook shards merged into the course gradebook (autograder/gradebook.py), outcomes written
  (autograder/outcome.py); a starved or hung job graded again once.
- `zygote`: a warm process with nbgrader imported, forking one `worker` per job.
- `worker`: in the job's process: nbgrader's autograde with the course's preprocessors.
- `settings`: the nbgrader configuration of a grading (the course's, plus the job's limits and sandbox).
- `cluster`: the same jobs on a Dask cluster.

Names are read from their module when first used (PEP 562): the worker and the zygote are modules of this package
run as programs, and must not import the parent's modules with it.
"""
import importlib

_FACE = {"grade": "grading", "GradingInterrupted": "grading", "grade_cluster": "cluster", "grading_config": "settings"}
__all__ = sorted(_FACE)


def __getattr__(name):
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
