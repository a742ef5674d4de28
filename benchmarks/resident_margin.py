"""The margin of the memory tests measured from outside the kernel: what honest answers hold, as the grader reads it.

    sudo python benchmarks/resident_margin.py            # lessons 08, 09 and 10
    sudo python benchmarks/resident_margin.py 09 --runs 3

Each lesson's solution runs in a sandboxed kernel with its own memory cgroup, as `python -m autograder grade` runs
a submission as root (the release copy filled with the solutions, its demonstrations left out), and each test cell
runs on this side through a Session that reads the kernel's cgroup (sandbox.KernelCgroup). For every call measured
from outside (`TensorMemory(resident=True)`) it prints what the kernel held as the grader reads it: the cgroup's peak
rise, plus the resident memory it touched less what it left, plus what it wrote to files, less the same figure of a
request that runs none of the student's code (`resident`), and the in-kernel count (`count`). Compare them with the
tests' limits (three quarters of the full scores or weights: docs/instructors.md). Root only (a cgroup); it reports,
it does not assert.
"""
import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from jupyter_core.utils import run_sync  # noqa: E402

from autograder import cells, sandbox  # noqa: E402
from autograder.kernel import verdicts  # noqa: E402
from autograder.kernel import session as kernel_session
from autograder.kernel import transport as transports
from autograder.sandbox.limits import Limits  # noqa: E402
from course_utils.memory import TensorMemory  # noqa: E402
from tests.autograder.hostile import without_demonstrations  # noqa: E402
from tests.nbtools import LESSONS, NOTEBOOKS, SOLUTIONS, fill_solutions, load  # noqa: E402

MEMORY_LESSONS = ("08", "09", "10")


def measured_calls():
    """Record every call TensorMemory absorbs with a resident figure: a list of (resident, count)."""
    calls, absorb = [], TensorMemory.absorb

    def recording(self, peak_bytes, largest_bytes, resident_bytes=None):
        absorb(self, peak_bytes, largest_bytes, resident_bytes)
        if resident_bytes is not None:
            calls.append((int(resident_bytes), int(peak_bytes)))
    TensorMemory.absorb = recording
    return calls


def run_lesson(lesson, settings, calls):
    """[(test cell, resident, count)] of one graded run of `lesson`'s solution in a sandboxed kernel."""
    source = load(SOLUTIONS / f"{lesson}.ipynb")
    nb = without_demonstrations(fill_solutions(load(NOTEBOOKS / f"{lesson}.ipynb"), source), lesson)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    km = sandbox.SandboxKernelManager(kernel_name="python3")
    km.sandbox = settings
    with tempfile.TemporaryDirectory() as cwd:
        loop.run_until_complete(km.start_kernel(cwd=cwd))
        kc = km.client()
        kc.start_channels()
        try:
            loop.run_until_complete(kc.wait_for_ready(timeout=120))
            group = sandbox.KernelCgroup.of(str(km.provisioner.pid))
            if group is None:
                sys.exit("no readable memory cgroup for the kernel: run as root where cgroups can be made")
            transport = transports.kernel_transport(
                kc, run_sync(kc.shell_channel.get_msg), deadline=lambda: time.monotonic() + 300,
                on_timeout=run_sync(km.interrupt_kernel), is_alive=run_sync(km.is_alive),
                get_stdin_msg=run_sync(kc.stdin_channel.get_msg))
            runner = verdicts.LessonTests(source).runner(kernel_session.Session(transport, cgroup=group))
            return list(_cells(nb, kc, runner, calls))
        finally:
            kc.stop_channels()
            loop.run_until_complete(km.shutdown_kernel(now=True))
            loop.close()


def _cells(nb, kc, runner, calls):
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        if not cells.is_test(cell):
            run_sync(kc.execute_interactive)(cell.source, timeout=300, output_hook=lambda msg: None)
            continue
        grade_id, first = cells.grade_id(cell), len(calls)
        _, error = runner.run(grade_id)
        if error is not None:
            print(f"  {grade_id} FAILED: {str(error)[:300]}")
        for resident, count in calls[first:]:
            yield grade_id, resident, count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", default=list(MEMORY_LESSONS))
    parser.add_argument("--runs", type=int, default=1, help="gradings of each lesson (default 1)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("root only: the kernel's memory cgroup is made and read as root")
    settings, warnings = sandbox.probe(sandbox.sandbox_settings(tempfile.mkdtemp(), Limits()))
    for w in warnings:
        print("warning:", w)
    calls = measured_calls()
    mib = lambda n: f"{n / 2 ** 20:7.1f} MiB"  # noqa: E731
    for lesson in [l for l in LESSONS if any(l.startswith(a) for a in args.lessons)]:
        for run in range(args.runs):
            print(f"{lesson} (run {run + 1}):")
            for grade_id, resident, count in run_lesson(lesson, settings, calls):
                print(f"  {grade_id:32s} resident {mib(resident)}  count {mib(count)}")


if __name__ == "__main__":
    main()
