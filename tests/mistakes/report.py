"""What the student reads for each mistake of the mistakes data: caught, named, and the message itself.

    python -m tests.mistakes.report 03 07        # lessons 03 and 07, every mistake with its message
    python -m tests.mistakes.report --table      # every lesson: the share named per lesson and per test cell

A mistake is named when the message on its own test cell contains the words listed with it (as
tests/lessons/test_mistakes.py checks). The table is the one docs/testing.md keeps.
"""
import argparse
import importlib
import pkgutil
import sys
from collections import defaultdict

from tests import mistakes
from tests.nbtools import LessonCode


def _words(case):
    if len(case) < 3:
        return ()
    return (case[2],) if isinstance(case[2], str) else tuple(case[2])


def _named(message, words):
    from autograder.shown import MAX_MESSAGE
    text = " ".join(message[:MAX_MESSAGE - 3].lower().split())
    return bool(words) and all(" ".join(w.lower().split()) in text for w in words)


def run(lesson_data, verbose):
    """[(test cell, mistake, caught, named, message)] for one lesson."""
    import torch
    torch.set_num_threads(1)
    code = LessonCode(lesson_data.LESSON)
    rows = []
    for name, case in lesson_data.MISTAKES.items():
        test_id, source = case[0], case[1]
        failure = code.run_all_test_cells(source)[test_id]
        message = "" if failure is None else str(failure)
        row = (test_id, name, failure is not None, failure is not None and _named(message, _words(case)), message)
        rows.append(row)
        if verbose:
            mark = "named " if row[3] else ("CAUGHT" if row[2] else "PASSED")
            print(f"[{mark}] {test_id} | {name}\n    words: {_words(case)}\n    {type(failure).__name__}: "
                  f"{message[:700]}\n", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson numbers (default: all)")
    parser.add_argument("--table", action="store_true", help="print the share named, as a Markdown table")
    args = parser.parse_args(argv)
    data = [importlib.import_module(f"tests.mistakes.{m.name}") for m in pkgutil.iter_modules(mistakes.__path__)
            if m.name.startswith("lesson")]
    data = [d for d in data if not args.lessons or d.LESSON[:2] in args.lessons]
    per_lesson, per_cell = {}, defaultdict(lambda: [0, 0])
    for d in data:
        rows = run(d, verbose=not args.table)
        per_lesson[d.LESSON] = (sum(r[3] for r in rows), len(rows))
        for r in rows:
            per_cell[d.LESSON[:2], r[0]][0] += r[3]
            per_cell[d.LESSON[:2], r[0]][1] += 1
    print("| lesson | mistakes | named | share |\n|---|---|---|---|")
    for lesson, (n_named, n) in per_lesson.items():
        print(f"| {lesson[:2]} | {n} | {n_named} | {100 * n_named / n:.0f}% |")
    total = sum(n for _, n in per_lesson.values())
    print(f"| all | {total} | {sum(k for k, _ in per_lesson.values())} | "
          f"{100 * sum(k for k, _ in per_lesson.values()) / max(total, 1):.0f}% |")
    if args.table:
        print("\n| lesson | test cell | mistakes | named |\n|---|---|---|---|")
        for (lesson, cell), (n_named, n) in sorted(per_cell.items()):
            print(f"| {lesson} | `{cell}` | {n} | {n_named} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
