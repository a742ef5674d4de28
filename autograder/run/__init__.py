"""The grading run: a class of submissions graded, each in a worker of its own, into the course gradebook.

The public face is `grade`, `GradingInterrupted`, `Result` (with `grade_cluster` for Dask, `Limits` and
`grading_config` for the configuration a grading uses). A newcomer reads the modules in this order:

- `grading`: the parent. Static flags, one job folder per submission (job.py), workers started and
  watched, their gradebook shards merged into the course gradebook (autograder/gradebook.py), reports written;
  a starved or hung job graded again once.
- `zygote`: a warm process with nbgrader imported, forking one `worker` per job.
- `worker`: in the job's process: nbgrader's autograde with the course's preprocessors.
- `settings`: the nbgrader configuration of a grading (the course's, plus the job's limits and sandbox).
- `cluster`: the same jobs on a Dask cluster.

Names are imported on first use (PEP 562): importing the face imports no more than is used.
"""
import importlib

_PUBLIC = {"grade": "grading", "GradingInterrupted": "grading", "Result": "grading", "grade_cluster": "cluster",
           "Limits": "settings", "grading_config": "settings"}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
