"""Each lesson's hidden tests catch the common mistakes and pass other correct answers.

A case runs one graded test cell of solutions/<lesson>.ipynb after the set-up and
solution cells, with one answer redefined by the code in tests/mistakes/lessonNN.py.
"""
import importlib
import pkgutil

import pytest

import mistakes
from nbtools import LessonCode

DATA = [importlib.import_module(f"mistakes.{m.name}") for m in pkgutil.iter_modules(mistakes.__path__)]
MISTAKES = [(d.LESSON, name, *case) for d in DATA for name, case in d.MISTAKES.items()]
ALTERNATIVES = [(d.LESSON, name, *case) for d in DATA for name, case in getattr(d, "ALTERNATIVES", {}).items()]
_LESSONS = {}


def lesson_code(lesson):
    if lesson not in _LESSONS:
        _LESSONS[lesson] = LessonCode(lesson)
    return _LESSONS[lesson]


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=[f"{c[0][:2]}: {c[1]}" for c in MISTAKES])
def test_mistake_is_caught(lesson, name, test_id, code):
    with pytest.raises(Exception) as failure:
        lesson_code(lesson).run_test_cell(test_id, code)
    # a typo in the mistake's own code must not count as a caught mistake
    assert not isinstance(failure.value, (NameError, SyntaxError, IndentationError)), repr(failure.value)


@pytest.mark.parametrize("lesson, name, test_id, code", ALTERNATIVES, ids=[f"{c[0][:2]}: {c[1]}" for c in ALTERNATIVES])
def test_other_correct_answer_passes(lesson, name, test_id, code):
    lesson_code(lesson).run_test_cell(test_id, code)
