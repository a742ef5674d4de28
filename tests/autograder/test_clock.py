"""sandbox/clock.py: a timeout is charged only when the kernel's code had the CPU; a busy machine's is not."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from autograder.run import grade
from autograder.sandbox.limits import Limits
from autograder.sandbox import clock
from tests.autograder import tiny
from tests.nbtools import fill_solutions, load, submit

LOOP = "while True:\n    pass"


def test_a_loop_on_a_quiet_core_is_charged_sleep_is_charged_a_starved_kernel_is_not():
    start = clock.Clock(ran=10.0, waited=1.0, at=100.0)
    assert clock.starved(start, clock.Clock(ran=39.0, waited=2.5, at=130.0))[0] is False    # ran 29 of 30 s
    assert clock.starved(start, clock.Clock(ran=10.1, waited=1.0, at=130.0))[0] is False    # slept
    assert clock.starved(start, clock.Clock(ran=20.0, waited=21.0, at=130.0))[0] is True    # ran 10, waited 20
    assert clock.starved(start, None)[0] is False and clock.starved(None, start)[0] is False


def test_a_wait_for_the_kernels_own_busy_children_is_charged_a_wait_for_other_work_is_not():
    """A kernel whose own child processes keep every core busy waits for a core as a starved one does: that wait
    is the student's doing. Only the CPU time the machine's other processes ran can explain a wait."""
    start = clock.Clock(ran=10.0, waited=1.0, at=100.0, busy=500.0)
    own = clock.Clock(ran=50.0, waited=41.0, at=130.0, busy=541.0)       # the tree ran 40 s of the 41 the machine ran
    assert clock.starved(start, own)[0] is False
    others = clock.Clock(ran=20.0, waited=21.0, at=130.0, busy=560.0)    # others ran 50 s while the tree waited 20
    assert clock.starved(start, others)[0] is True
    assert clock.read(os.getpid()).busy > 0


def test_the_clock_of_a_real_process_tree_counts_its_childrens_run_time():
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {LOOP!r}])\ntime.sleep(60)"])
    try:
        time.sleep(0.5)
        first = clock.read(parent.pid)
        time.sleep(1.5)
        second = clock.read(parent.pid)
        assert second.ran + second.waited - first.ran - first.waited > 1.0, (first, second)  # the child's loop
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)])
        parent.kill()


class Hogs:
    """One core 5x oversubscribed while a kernel runs: this process (so the grader, its worker and the kernel) and
    four busy processes pinned to it, each hog in a session of its own as another grader's would be (Linux shares
    a core between sessions first); the other cores stay free for the rest of the suite. The hogs start when the
    job's kernel has started (kernels.txt) and stop between attempts, so that no start-up waits on them."""

    def __init__(self, kernels_txt):
        import threading
        self.kernels_txt, self.procs, self.done = kernels_txt, [], threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self.done.wait(0.1):
            kernel = self.kernels_txt.exists() and self.kernels_txt.read_text().strip()
            if kernel and not self.procs:
                self.procs = [subprocess.Popen([sys.executable, "-c", LOOP], start_new_session=True) for _ in range(4)]
            elif not kernel and self.procs:
                self._stop()

    def _stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []

    def __enter__(self):
        self.before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {max(self.before)})
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self._stop()
        os.sched_setaffinity(0, self.before)


def test_a_timeout_while_the_machine_is_busy_is_graded_again_and_then_left_for_manual_grading(tiny_course, tmp_path):
    """`square` loops forever and the machine is oversubscribed: the cell's timeout comes while the kernel waits
    for a core, so it is not charged: graded again after the others, starved again, test_square pending (never 0),
    flagged `grader:`; test_double, which passed, keeps its point."""
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    nb = fill_solutions(load(course / "release" / lesson / f"{lesson}.ipynb"), tiny.lesson())
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "square")
    answer.source = f"def square(x):\n    {LOOP.replace(chr(10), chr(10) + '    ')}\n"
    submit(course, lesson, "busy", nb)
    logged = []
    with Hogs(course / ".grading" / lesson / "busy" / "kernels.txt"):
        [r] = grade(course, [lesson], limits=Limits(cell_timeout=4, notebook_timeout=120), log=logged.append)
    assert any("graded again after the others" in line for line in logged), logged
    assert (r.score, r.pending) == (1, ["test_square"]), r
    assert any(f.startswith("grader: ") and "too busy" in f for f in r.flags), r.flags
