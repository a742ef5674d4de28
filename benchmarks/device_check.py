"""Run every solution notebook on this machine's accelerator and print, per lesson and mode, the time,
the device and any error with the cell it came from.

    python benchmarks/device_check.py                  # every lesson, fast and full, on pick_device()
    python benchmarks/device_check.py 01 05 --mode fast
    python benchmarks/device_check.py --device sim     # a CPU playing a GPU: placement faults raise (no timing)
    python benchmarks/device_check.py --device cpu     # force the CPU, for the column beside the GPU's

The device is what `course_utils.pick_device()` chooses (CUDA, then MPS, then the CPU), or
`--device`, passed to the notebooks as COURSE_DEVICE. Each notebook runs in a fresh kernel with its
own test cells; a lesson "passes" when no cell raised. Times are wall seconds for the whole notebook,
kernel start included. It reports; it does not assert. Exit status 1 when any lesson raised.
"""
import argparse
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.nbtools import LESSONS, SOLUTIONS, errors, execute, load  # noqa: E402


def describe(device):
    """'cuda (NVIDIA H100 80GB HBM3), torch 2.x' or 'cpu (2 cores), torch 2.x'."""
    import torch
    import course_utils as cu
    if device == "sim":
        return f"sim (a CPU playing CUDA; placement faults raise), torch {torch.__version__}"
    chosen = cu.pick_device(device)
    name = {"cuda": lambda: torch.cuda.get_device_name(0), "mps": lambda: platform.processor() or "Apple"}
    detail = name.get(chosen.type, lambda: f"{os.cpu_count()} cores")()
    return f"{chosen.type} ({detail}), torch {torch.__version__}"


def run(lesson, fast, device, timeout):
    """-> (seconds, [(cell, ename, evalue)]) for one solution notebook."""
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    env = {"COURSE_DEVICE": device} if device else {}
    start = time.perf_counter()
    try:
        ran = execute(nb, fast=fast, timeout=timeout, extra_env=env)
        found = errors(ran)
    except Exception as exc:  # a cell past its timeout, a dead kernel
        found = [(None, type(exc).__name__, str(exc).splitlines()[0][:200])]
    return time.perf_counter() - start, found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="lesson number prefixes (default: all)")
    parser.add_argument("--mode", choices=["fast", "full", "both"], default="both")
    parser.add_argument("--device", choices=["cpu", "cuda", "mps", "sim"], default=None,
                        help="COURSE_DEVICE for the notebooks (default: what pick_device() chooses)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at a time (1 for timings)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args()
    lessons = [lesson for lesson in LESSONS if not args.lessons or lesson[:2] in args.lessons]
    modes = {"fast": [True], "full": [False], "both": [True, False]}[args.mode]
    print(f"device: {describe(args.device)}", flush=True)
    print(f"{'lesson':34s} {'mode':5s} {'wall s':>7s}  errors", flush=True)
    runs = [(lesson, fast) for lesson in lessons for fast in modes]
    failed = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = pool.map(lambda r: run(r[0], r[1], args.device, args.timeout), runs)
        for (lesson, fast), (seconds, found) in zip(runs, results):
            failed += bool(found)
            shown = "; ".join(f"cell {cell}: {ename}: {evalue.splitlines()[0][:160] if evalue else ''}"
                              for cell, ename, evalue in found) or "-"
            print(f"{lesson:34s} {'fast' if fast else 'full':5s} {seconds:7.1f}  {shown}", flush=True)
    print(f"{len(runs) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
