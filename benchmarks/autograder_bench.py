"""Grading speed of `python -m autograder grade`: the three figures of issue 6.

    python benchmarks/autograder_bench.py                 # every lesson, 2 students
    python benchmarks/autograder_bench.py 03 04 --students 4

Each student submits every lesson, filled in with the solutions (a perfect class). It prints:

1. seconds per student for the whole series, grading with --jobs 1 and with --jobs 2;
2. the speed-up of --jobs 2 over --jobs 1 (goal: at least 1.6x on 2 cores);
3. grading (--jobs 1) against plain nbclient execution of the same notebooks, one after the
   other, in the same fast mode (goal: at most 1.25x);
4. the runtime integrity check on its own (autograder/kernel/integrity.py), run in this process as the
   kernel runs it: the baseline (which imports what the notebooks import anyway) and one check.

Wall and CPU seconds are both reported. CPU is the whole machine's busy time (/proc/stat)
while a phase runs: a sandboxed kernel lives in its own PID namespace and is reaped by
bubblewrap, so getrusage() of this process never sees its time. Run it on a quiet machine;
the load average at the start and end says how quiet it was. The
script reports; it does not assert.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import nbformat  # noqa: E402

from autograder.course import release  # noqa: E402
from autograder.run import grade, zygote  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402
from tests.nbtools import LESSONS, SOLUTIONS, execute, fill_solutions, load  # noqa: E402


def cpu_seconds():
    """Busy CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def timed(fn):
    wall, cpu = time.perf_counter(), cpu_seconds()
    out = fn()
    return out, time.perf_counter() - wall, cpu_seconds() - cpu


def make_class(root, lessons, students):
    """A released course with `students` perfect submissions of every lesson; returns the notebooks."""
    release(root, lessons, notebooks=None, log=lambda *_: None)
    perfect = {}
    for lesson in lessons:
        perfect[lesson] = fill_solutions(load(root / "release" / lesson / f"{lesson}.ipynb"),
                                         load(SOLUTIONS / f"{lesson}.ipynb"))
        for i in range(students):
            folder = root / "submitted" / f"student{i + 1}" / lesson
            folder.mkdir(parents=True)
            nbformat.write(perfect[lesson], str(folder / f"{lesson}.ipynb"))
    return perfect


def run_plain(perfect, students):
    """nbclient, one notebook after the other, fast mode as in grading (NBGRADER_EXECUTION)."""
    seconds = {}
    for i in range(students):
        for lesson, nb in perfect.items():
            start = time.perf_counter()
            execute(nbformat.reads(nbformat.writes(nb), as_version=4), fast=True, timeout=600,
                    extra_env={"NBGRADER_EXECUTION": "autograde"})
            seconds[f"student{i + 1}", lesson] = time.perf_counter() - start
    print("  plain: " + ", ".join(f"{student} {lesson[:2]} {t:.1f} s" for (student, lesson), t in seconds.items()))
    return seconds


def integrity_cost(repeats=20):
    """Seconds for the integrity baseline and for one check, in this process, as the kernel runs them."""
    from autograder.kernel import integrity
    watch = integrity.Watch()

    def answer(mode):  # the request evaluated here, its text read back as the grader reads the kernel's
        nonce, expression = watch.request(mode)
        text = repr(eval(expression))  # noqa: S307: the grader's own request
        return watch.parse(nonce, {"content": {"user_expressions": {"check": {
            "status": "ok", "data": {"text/plain": text}}}}})

    start = time.perf_counter()
    watch.baseline = answer("baseline")
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeats):
        assert watch.changes(answer("check")) == []
    return baseline, (time.perf_counter() - start) / repeats, len(watch.baseline["paths"])


def run_grade(base, tmp, jobs):
    course = Path(tmp) / f"course-jobs{jobs}"
    shutil.copytree(base, course)
    results = grade(course, jobs=jobs, limits=Limits(), log=lambda *_: None)
    zygote.close_idle()  # the next run starts its own, as an instructor's next `grade` does
    print(f"  --jobs {jobs}: " + ", ".join(f"{r.student} {r.lesson[:2]} {r.seconds:.1f} s" for r in results))
    for r in results:
        for event in r.events:
            print(f"    {r.student} {r.lesson}: {event}")
    bad = [f"{r.student}/{r.lesson}: {r.status} {r.score:g}/{r.max_score:g}" for r in results
           if r.status != "graded" or r.score != r.max_score or r.flags]
    if bad:
        print("  not a clean perfect class:", "; ".join(bad))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("lessons", nargs="*", help="lesson number prefixes (default: all)")
    parser.add_argument("--students", type=int, default=2, help="students in the class (default 2)")
    args = parser.parse_args()
    lessons = [lesson for lesson in LESSONS if not args.lessons or lesson[:2] in args.lessons]
    n = args.students
    cores = len(os.sched_getaffinity(0))
    print(f"{n} student(s) x {len(lessons)} lesson(s) ({', '.join(l[:2] for l in lessons)}), {cores} core(s), "
          f"load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "course"
        perfect = make_class(base, lessons, n)
        plain, plain_wall, plain_cpu = timed(lambda: run_plain(perfect, n))
        graded, wall1, cpu1 = timed(lambda: run_grade(base, tmp, 1))
        _, wall2, cpu2 = timed(lambda: run_grade(base, tmp, 2))
    print(f"{'':24s} {'wall s':>8s} {'CPU s':>8s} {'wall s/student':>15s}")
    for name, wall, cpu in [("plain nbclient", plain_wall, plain_cpu), ("grade --jobs 1", wall1, cpu1),
                            ("grade --jobs 2", wall2, cpu2)]:
        print(f"{name:24s} {wall:8.1f} {cpu:8.1f} {wall / n:15.1f}")
    print(f"seconds per student, whole series: {wall1 / n:.1f} (--jobs 1), {wall2 / n:.1f} (--jobs 2)")
    print(f"--jobs 2 vs --jobs 1: {wall1 / wall2:.2f}x faster (goal >= 1.6x on 2 cores)")
    print(f"grading vs plain execution: {wall1 / plain_wall:.2f}x wall, {cpu1 / plain_cpu:.2f}x CPU (goal <= 1.25x)")
    later = [r for r in graded if r.student != "student1" and (r.student, r.lesson) in plain]
    if later:  # a grading run starts its warm worker once (zygote.py); every later submission finds it ready
        steady = sum(r.seconds for r in later) / sum(plain[r.student, r.lesson] for r in later)
        first = sum(r.seconds for r in graded if r.student == "student1")
        print(f"  after the first student (--jobs 1): {steady:.2f}x plain; the first student's grading took "
              f"{first - sum(r.seconds for r in later) / (n - 1):.1f} s more (the warm worker's one start per run)")
    baseline, check, watched = integrity_cost()
    print(f"integrity check: baseline {baseline:.2f} s (with the imports), {check * 1000:.1f} ms per test cell, "
          f"{watched} objects watched")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
