"""Grading on a busy machine: does an honest answer lose a point when other work starves its kernel?

    python benchmarks/busy_grading.py                 # 0x, 3x and 5x oversubscribed, 6 students
    python benchmarks/busy_grading.py --load 5 --students 4

A small lesson whose exercise needs about 1.7 s of CPU (a sieve in plain Python to 10 million: a fifth of
its test cell's 8 s limit on a quiet core, more than the limit when a core is shared five ways) is graded for a class of honest, wrong and endless answers, while CPU
hogs, each in a session of its own as other graders' would be, keep the machine's cores oversubscribed
(`--load 3`: the grader's kernels and the hogs want three times the cores). It prints, per load:

1. points the honest answers lost (the goal: 0; a test cell left for manual grading is pending, not lost);
2. the wrong answers caught (the goal: all of them) and the endless loops not given points;
3. how many submissions were graded again (a timeout while starved, sandbox/clock.py) and the wall time.

The script reports; it does not assert.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

import nbformat  # noqa: E402
from nbformat.v4 import new_notebook  # noqa: E402

from autograder.course import release  # noqa: E402
from autograder.run import grade  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from tests.autograder.tiny import cell  # noqa: E402

LESSON = "00_busy"
HONEST = "def count_primes(n):\n    sieve = bytearray([1]) * n\n    sieve[:2] = b'\\x00\\x00'\n" \
         "    for i in range(2, int(n ** 0.5) + 1):\n        if sieve[i]:\n            for j in range(i * i, n, i):\n" \
         "                sieve[j] = 0\n    return sum(sieve)\n"
ANSWERS = {"honest": HONEST,
           "wrong": HONEST.replace("return sum(sieve)", "return sum(sieve) + 1"),
           "endless": "def count_primes(n):\n    while True:\n        pass\n"}


def lesson():
    nb = new_notebook()
    setup = cell("import math", "setup")
    setup.metadata["tags"] = ["grader-setup"]
    nb.cells = [setup,
                cell("### BEGIN SOLUTION\n" + HONEST + "### END SOLUTION", "answer", grade_id="count_primes",
                     solution=True),
                cell("assert count_primes(100) == 25\n### BEGIN HIDDEN TESTS\nassert count_primes(10_000_000) == 664579\n"
                     "### END HIDDEN TESTS", "test", grade_id="test_count_primes", grade=True, locked=True, points=2)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def make_course(root, students):
    solutions = root / "solutions"
    solutions.mkdir()
    nbformat.write(lesson(), str(solutions / f"{LESSON}.ipynb"))
    course = root / "course"
    release(course, [LESSON], solutions=solutions, notebooks=None, log=lambda *_: None)
    released = nbformat.read(str(course / "release" / LESSON / f"{LESSON}.ipynb"), as_version=4)
    for i in range(students):
        kind = list(ANSWERS)[i % len(ANSWERS)]
        nb = nbformat.from_dict(released)
        for c in nb.cells:
            if c.metadata.get("nbgrader", {}).get("grade_id") == "count_primes":
                c.source = ANSWERS[kind]
        folder = course / "submitted" / f"{kind}{i}" / LESSON
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{LESSON}.ipynb"))
    return course


def run(load, students, jobs):
    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(max(0, load * cores - jobs))]
    root = Path(tempfile.mkdtemp(prefix="busy-"))
    try:
        course = make_course(root, students)
        logged, start = [], time.monotonic()
        results = grade(course, [LESSON], jobs=jobs, limits=Limits(cell_timeout=8), log=logged.append)
        seconds = time.monotonic() - start
    finally:
        for h in hogs:
            h.kill()
        shutil.rmtree(root, ignore_errors=True)
    kind = lambda r: r.student.rstrip("0123456789")  # noqa: E731
    honest = [r for r in results if kind(r) == "honest"]
    lost = sum(r.max_score - r.score for r in honest if not r.pending)  # (pending: no score yet, nothing lost)
    pending = sum(bool(r.pending) for r in results)
    caught = sum(r.score == 0 for r in results if kind(r) == "wrong")
    endless = sum(r.score == 0 or bool(r.pending) for r in results if kind(r) == "endless")
    again = sum("graded again" in line for line in logged)
    print(f"load {load}x ({len(hogs)} hogs on {cores} cores): honest answers lost {lost:g} point(s) "
          f"({len(honest)} submissions), wrong answers caught {caught} of {sum(kind(r) == 'wrong' for r in results)}, "
          f"endless loops scored 0 or pending {endless} "
          f"of {sum(kind(r) == 'endless' for r in results)}; {pending} pending manual grading, {again} graded again; "
          f"{seconds:.0f} s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, nargs="*", default=[0, 3, 5], help="times the cores wanted (0: quiet)")
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d')}, {len(os.sched_getaffinity(0))} cores, Python {sys.version.split()[0]}; "
          f"cell limit 8 s; the honest answer needs about 1.7 s of CPU")
    for load in args.load:
        run(load, args.students, args.jobs)


if __name__ == "__main__":
    main()
