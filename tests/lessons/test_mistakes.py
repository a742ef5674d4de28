"""Each lesson's hidden tests catch the common mistakes, charge each one once, and pass other correct answers.

A case runs every graded test cell of solutions/<lesson>.ipynb, in notebook order, after the
set-up (run once per lesson) and the solution cells, with one answer redefined by the code in
tests/mistakes/lessonNN.py. A mistake must fail the test cell it is listed under and pass every
other one (issue 19 section 8: one bug costs the points of its own exercise only), except the
cells a lesson lists for it in ALSO_FAILS ({mistake: (test cells, why no test can avoid it)});
another correct answer must pass every cell. Lessons are found from the data modules, so a new
lessonNN.py (LESSON, MISTAKES, ALTERNATIVES) is picked up as it is.
"""
import importlib
import pkgutil

import pytest

from tests import mistakes
from tests.nbtools import LessonCode

DATA = [importlib.import_module(f"tests.mistakes.{m.name}") for m in pkgutil.iter_modules(mistakes.__path__)]
MISTAKES = [(d.LESSON, name, *case) for d in DATA for name, case in d.MISTAKES.items()]
ALTERNATIVES = [(d.LESSON, name, *case) for d in DATA for name, case in getattr(d, "ALTERNATIVES", {}).items()]
ALSO_FAILS = {(d.LESSON, name): set(cells) for d in DATA for name, (cells, _why) in getattr(d, "ALSO_FAILS", {}).items()}
_LESSONS = {}
_VERDICTS = {}
# errors that mean the case's own code is broken (a typo), not that a test caught it
_BROKEN_CASE = (NameError, SyntaxError, IndentationError)


def lesson_code(lesson):
    if lesson not in _LESSONS:
        _LESSONS[lesson] = LessonCode(lesson)
    return _LESSONS[lesson]


def verdicts(lesson, code):
    """{test cell: None or its exception} with `code` in place; each case is run once for all its tests."""
    if (lesson, code) not in _VERDICTS:
        _VERDICTS[lesson, code] = lesson_code(lesson).run_all_test_cells(code)
    return _VERDICTS[lesson, code]


def _ids(cases):
    return [f"{c[0][:2]}: {c[1]}" for c in cases]


def _describe(failures):
    return "; ".join(f"{test_id}: {type(e).__name__}: {str(e)[:200]}" for test_id, e in failures.items())


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=_ids(MISTAKES))
def test_mistake_is_caught(lesson, name, test_id, code):
    assert test_id in lesson_code(lesson).tests, f"{lesson} has no graded test cell {test_id!r}"
    failure = verdicts(lesson, code)[test_id]
    assert failure is not None, f"{test_id} passed with the mistake in place"
    # a typo in the mistake's own code must not count as a caught mistake
    assert not isinstance(failure, _BROKEN_CASE), repr(failure)


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=_ids(MISTAKES))
def test_mistake_costs_only_its_own_exercise(lesson, name, test_id, code):
    allowed = ALSO_FAILS.get((lesson, name), set())
    others = {t: e for t, e in verdicts(lesson, code).items() if t != test_id and t not in allowed and e is not None}
    assert not others, f"the mistake for {test_id} also fails {_describe(others)}"


@pytest.mark.parametrize("lesson, name, test_id, code", ALTERNATIVES, ids=_ids(ALTERNATIVES))
def test_other_correct_answer_passes(lesson, name, test_id, code):
    assert test_id in lesson_code(lesson).tests, f"{lesson} has no graded test cell {test_id!r}"
    failures = {t: e for t, e in verdicts(lesson, code).items() if e is not None}
    assert not failures, f"a correct answer for {test_id} fails {_describe(failures)}"
