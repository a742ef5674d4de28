"""Does a notebook run ever hang? Execute one lesson N times, as the grader runs it, and count.

    python benchmarks/hang_check.py 03 -n 200                  # plain nbclient kernel
    python benchmarks/hang_check.py 04 -n 50 --sandbox         # the grader's sandboxed kernel

Each run executes the lesson's solution notebook in a fresh kernel in fast mode (the grader's
NBGRADER_EXECUTION), with a cell timeout far above any cell's real time (--cell-timeout, 60 s),
so a timed-out cell is a hang: the kernel sat idle and the reply never came (ipykernel issue
1554), not slow code. A dead kernel and a cell error are counted separately. It prints one
line per run and a summary: runs, hangs (with the cell), dead kernels, errors, seconds per run,
and the versions of ipykernel, pyzmq and jupyter_client. It reports; it does not assert.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]
import nbformat  # noqa: E402
from autograder.nbrun import NotebookClient  # noqa: E402
from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: E402


def lesson_path(name):
    found = sorted((REPO / "solutions").glob(f"{name}*.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"no single solution notebook matches {name!r}: {[p.name for p in found]}")
    return found[0]


def sandbox_settings(cwd):
    """The grader's sandbox settings, probed once (warnings printed)."""
    from autograder import sandbox
    from autograder.sandbox.limits import Limits
    settings, warnings = sandbox.probe(sandbox.sandbox_settings(cwd, Limits()))
    for w in warnings:
        print(f"WARNING: {w}", flush=True)
    print(f"sandbox: {sandbox.attempt_name(settings)}", flush=True)
    return settings


def run_once(source, args, cwd, settings):
    nb = nbformat.from_dict(source)
    c = NotebookClient(nb, timeout=args.cell_timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(cwd)}})
    if settings is not None:
        from autograder import sandbox
        c.kernel_manager_class = sandbox.SandboxKernelManager
        c.km = c.create_kernel_manager()
        c.km.sandbox = settings
    start = time.monotonic()
    try:
        c.execute()
        outcome = "ok"
        errors = [(i, o.ename) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                  for o in cell.get("outputs", []) if o.output_type == "error"]
        if errors:
            outcome = f"error {errors[:3]}"
    except CellTimeoutError as e:
        outcome = f"hang: {str(e).splitlines()[0][:120]}"
    except DeadKernelError as e:
        outcome = f"dead kernel: {str(e).splitlines()[0][:120]}"
    return outcome, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lesson", help="lesson number or name, e.g. 03")
    parser.add_argument("-n", type=int, default=200, help="number of executions")
    parser.add_argument("--cell-timeout", type=int, default=60, help="seconds before a cell counts as hung")
    parser.add_argument("--sandbox", action="store_true", help="start each kernel in the grader's sandbox")
    args = parser.parse_args()
    import ipykernel
    import jupyter_client
    import zmq
    path = lesson_path(args.lesson)
    source = nbformat.read(str(path), as_version=4)
    source.cells = [c for c in source.cells if c.get("id") != "colab-setup"]  # Colab only
    os.environ.update(COURSE_FAST="1", NBGRADER_EXECUTION="autograde",
                      MPLBACKEND="module://matplotlib_inline.backend_inline")
    print(f"{path.name}: {args.n} runs, cell timeout {args.cell_timeout} s, sandbox {args.sandbox}; "
          f"ipykernel {ipykernel.__version__}, pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()}), "
          f"jupyter_client {jupyter_client.__version__}", flush=True)
    settings = sandbox_settings(REPO / "solutions") if args.sandbox else None
    counts, seconds = {"ok": 0, "hang": 0, "dead kernel": 0, "error": 0}, []
    hangs = []
    for i in range(args.n):
        outcome, s = run_once(source, args, REPO / "solutions", settings)
        seconds.append(s)
        kind = next(k for k in counts if outcome.startswith(k))
        counts[kind] += 1
        if kind != "ok":
            hangs.append((i + 1, outcome))
        print(f"run {i + 1}/{args.n}: {outcome} in {s:.1f} s", flush=True)
    seconds.sort()
    summary = dict(notebook=path.name, runs=args.n, **counts, problems=hangs,
                   median_s=round(seconds[len(seconds) // 2], 1), max_s=round(seconds[-1], 1),
                   ipykernel=ipykernel.__version__, pyzmq=zmq.__version__, sandbox=args.sandbox)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
