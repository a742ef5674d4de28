"""A class at scale: grade N submissions of one lesson and watch time and memory stay flat.

    python benchmarks/class_scale.py 03 --students 300 --jobs 2
    python benchmarks/class_scale.py 04 --students 300 --jobs 2 --light

Every student submits the lesson filled in with its solution (with --light, without the
demonstration cells no graded cell needs, as a student may hand it in: every test cell is graded
as before in about half the time per submission; tests/autograder/hostile.without_demonstrations). Grading runs as
`python -m autograder grade --jobs N` does (fast mode, sandboxed where bubblewrap is present).
It prints, for each tenth of the class in the order the submissions finished, the wall seconds
per submission, and the parent's peak resident memory (ru_maxrss) after each tenth: both should
stay flat as the class and the gradebook grow (the gradebook merge does not slow down as it fills).
Then it times `python -m autograder report` on the graded class (the class report's page for the lesson).
It reports; it does not assert. Run it on a quiet machine.
"""
import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import nbformat  # noqa: E402

from autograder.class_report import build_report  # noqa: E402
from autograder.course import release  # noqa: E402
from autograder.run import grade  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, load  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lesson", help="lesson number, e.g. 03")
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--light", action="store_true", help="hand the lesson in without its demonstrations")
    args = parser.parse_args()
    lesson = next(name for name in LESSONS if name.startswith(args.lesson))
    root = Path(tempfile.mkdtemp(prefix="class-scale-")) / "course"
    try:
        release(root, [lesson], notebooks=None, log=lambda *_: None)
        perfect = fill_solutions(load(root / "release" / lesson / f"{lesson}.ipynb"), load(SOLUTIONS / f"{lesson}.ipynb"))
        if args.light:
            from tests.autograder.hostile import without_demonstrations
            perfect = without_demonstrations(perfect, lesson)
        for i in range(args.students):
            folder = root / "submitted" / f"student{i:04d}" / lesson
            folder.mkdir(parents=True)
            nbformat.write(perfect, str(folder / f"{lesson}.ipynb"))
        finished = []  # (monotonic time, parent peak RSS in MiB) when each submission was logged

        def log(line):
            if line.startswith(lesson):
                finished.append((time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))

        start = time.monotonic()
        results = grade(root, [lesson], jobs=args.jobs, limits=Limits(), log=log)
        total = time.monotonic() - start
        graded = sum(r.status == "graded" and r.score == r.max_score for r in results)
        print(f"{lesson}{' (light)' if args.light else ''}: {len(results)} submissions with --jobs {args.jobs} in {total:.0f} s "
              f"({total / max(1, len(results)):.2f} s each); {graded} with full marks")
        print("tenth  submissions  s/submission  parent peak RSS (MiB)")
        tenth = max(1, len(finished) // 10)
        previous = start
        for k in range(0, len(finished), tenth):
            chunk = finished[k:k + tenth]
            end = chunk[-1][0]
            print(f"{k // tenth + 1:5d}  {len(chunk):11d}  {(end - previous) / len(chunk):12.2f}  {chunk[-1][1]:21.0f}")
            previous = end
        start = time.monotonic()
        page = build_report(root, [lesson], log=lambda *_: None).with_name(f"{lesson}.html")
        print(f"class report of {len(results)} submissions: {time.monotonic() - start:.1f} s "
              f"({page.stat().st_size / 1024:.0f} KB page)")
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
