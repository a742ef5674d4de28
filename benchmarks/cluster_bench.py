"""Grading on Dask against local grading, on this machine.

    python benchmarks/cluster_bench.py                  # lesson 03, 8 students
    python benchmarks/cluster_bench.py 04 --students 6

A perfect class is graded twice: `grade --jobs 2` (two local worker processes) and
`grade --scheduler` on a local Dask cluster of two single-threaded workers (started before
the clock starts, as an instructor's cluster would be). It prints:

1. throughput, notebooks per minute, for each;
2. the per-notebook overhead of the Dask path: (Dask wall time - local wall time) / notebooks,
   and the same as a share of the local time per notebook (goal: under 10%).

The script reports; it does not assert. Timings on a shared machine are noisy: run it when
the machine is quiet, and more than once.
"""
import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from autograder_bench import make_class  # noqa: E402

from autograder.course import submissions  # noqa: E402
from autograder.run import cluster, grade  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from tests.nbtools import LESSONS  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", default=["03"], help="lesson numbers (default 03)")
    parser.add_argument("--students", type=int, default=8)
    args = parser.parse_args()
    lessons = [l for l in LESSONS if any(l.startswith(n) for n in args.lessons)]
    limits = Limits()
    with tempfile.TemporaryDirectory() as tmp:
        local_course, dask_course = Path(tmp, "local"), Path(tmp, "dask")
        make_class(local_course, lessons, args.students)
        shutil.copytree(local_course, dask_course)
        n = len(submissions(local_course))

        start = time.perf_counter()
        grade(local_course, jobs=2, limits=limits, log=lambda *a: None)
        local_s = time.perf_counter() - start

        client = cluster.connect("local:2")
        client.wait_for_workers(2)
        start = time.perf_counter()
        results = cluster.grade_on_cluster(submissions(dask_course), None, limits=limits, log=lambda *a: None,
                                           client=client)
        dask_s = time.perf_counter() - start
        client.close()
        client.cluster.close()
    assert len(results) == n
    per_nb = (dask_s - local_s) / n
    print(f"{n} notebooks ({', '.join(lessons)}), 2 workers each way")
    print(f"local --jobs 2      : {local_s:6.1f} s  {60 * n / local_s:5.1f} notebooks/min")
    print(f"Dask, 2 workers     : {dask_s:6.1f} s  {60 * n / dask_s:5.1f} notebooks/min")
    print(f"Dask overhead       : {per_nb:+.2f} s per notebook ({100 * (dask_s - local_s) / local_s:+.1f}% of local)")


if __name__ == "__main__":
    main()
