"""Time every solution notebook in fast and full mode and print the figures.

    python benchmarks/notebook_times.py                 # every lesson, both modes
    python benchmarks/notebook_times.py 01 --mode full  # one lesson, one mode

Budgets (CONTRIBUTING.md): at most 90 s in full mode and 15 s in fast mode on
a 2-core CPU. The script reports; it does not assert (timings are noisy on a
shared machine). For lessons that leave `accuracy_by_length`, it prints it too.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.nbtools import LESSONS, SOLUTIONS, errors, execute, json_variable_cell, load, read_json_variable  # noqa: E402


def run(lesson, fast):
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    nb.cells.append(json_variable_cell("accuracy_by_length"))
    start = time.perf_counter()
    nb = execute(nb, fast=fast, timeout=1200)
    seconds = time.perf_counter() - start
    try:
        curves = read_json_variable(nb, "accuracy_by_length")
    except AssertionError:  # this lesson has no such curve
        curves = None
    lesson_errors = [e for e in errors(nb) if e[0] < len(nb.cells) - 1]
    return seconds, lesson_errors, curves


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="lesson number prefixes (default: all)")
    parser.add_argument("--mode", choices=["fast", "full", "both"], default="both")
    args = parser.parse_args()
    lessons = [lesson for lesson in LESSONS if not args.lessons or lesson[:2] in args.lessons]
    modes = {"fast": [True], "full": [False], "both": [True, False]}[args.mode]
    print(f"{'lesson':28s} {'mode':5s} {'wall s':>7s}  budget  errors")
    for lesson in lessons:
        for fast in modes:
            seconds, errs, curves = run(lesson, fast)
            budget = 15 if fast else 90
            verdict = "ok" if seconds <= budget else "OVER"
            print(f"{lesson:28s} {'fast' if fast else 'full':5s} {seconds:7.1f}  {budget:3d} {verdict:4s}  {errs or '-'}")
            if curves and not fast:
                for name, by_length in curves.items():
                    row = "  ".join(f"{n}:{100 * a:.0f}%" for n, a in by_length.items())
                    print(f"    {name:14s} {row}")


if __name__ == "__main__":
    main()
