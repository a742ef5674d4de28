"""How long do starting and stopping a kernel in the grading sandbox take, against a plain kernel?

    python benchmarks/sandbox_start.py          # 5 rounds
    python benchmarks/sandbox_start.py -n 10

Each round starts, in turn (so that the machine's load falls on all of them alike), a kernel:

1. plain: jupyter_client's own manager, TCP on loopback, no sandbox;
2. sandbox, no bubblewrap: the launcher with its uid, cgroups and rlimits only;
3. sandbox, full: bubblewrap as well (as the grader runs it when it can).

A start is timed from start_kernel() until the kernel answers kernel_info (wait_for_ready);
then a one-line cell is run, and the stop is timed: a graceful shutdown, as nbclient (and so
the grader) ends every notebook. It prints the median and the range of each, and the full
sandbox's medians over the plain one. It reports; it does not assert.
"""
import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]
from jupyter_client.manager import AsyncKernelManager  # noqa: E402

from autograder import sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402


async def start_once(make_km, cwd):
    km = make_km()
    start = time.perf_counter()
    await km.start_kernel(cwd=cwd)
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=120)
    seconds = time.perf_counter() - start
    reply = await kc.execute_interactive("x = 1 + 1", timeout=60)
    assert reply["content"]["status"] == "ok", reply
    kc.stop_channels()
    stop = time.perf_counter()
    await km.shutdown_kernel(now=False)
    return seconds, time.perf_counter() - stop


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="rounds")
    args = parser.parse_args()
    cwd = tempfile.mkdtemp(prefix="ag-bench-")
    settings, warnings = sandbox.probe(sandbox.sandbox_settings(cwd, Limits()))
    without, more = sandbox.probe({**sandbox.sandbox_settings(cwd, Limits()), "bwrap": False})
    for w in warnings + more:
        print(f"WARNING: {w}")

    def sandboxed(s):
        def make():
            km = sandbox.SandboxKernelManager(kernel_name="python3")
            km.sandbox = s
            return km
        return make

    kinds = {"plain": lambda: AsyncKernelManager(kernel_name="python3"),
             f"sandbox, no bubblewrap ({sandbox.attempt_name(without)})": sandboxed(without),
             f"sandbox, full ({sandbox.attempt_name(settings)})": sandboxed(settings)}
    times = {k: [] for k in kinds}
    for i in range(args.n):
        for kind, make in kinds.items():
            times[kind].append(asyncio.run(start_once(make, cwd)))
        print(f"round {i + 1}: " + ", ".join(f"{k.split(' (')[0]} {v[-1][0]:.2f} + {v[-1][1]:.2f} s"
                                              for k, v in times.items()), flush=True)
    for kind, t in times.items():
        for what, values in zip(("start", "stop"), zip(*t)):
            print(f"{kind}, {what}: median {statistics.median(values):.2f} s "
                  f"(min {min(values):.2f}, max {max(values):.2f}) over {len(values)} kernels")
    for i, what in enumerate(("start", "stop")):
        plain, full = (statistics.median(v[i] for v in t) for t in (times["plain"], list(times.values())[-1]))
        print(f"full sandbox / plain, {what}: {full / plain:.2f}x ({full - plain:+.2f} s per kernel)")
    shutil.rmtree(cwd, ignore_errors=True)


if __name__ == "__main__":
    main()
