"""The student notebooks are exactly what nbgrader generates from the solutions."""
import pytest

from tests.nbtools import LESSONS, NOTEBOOKS, load


@pytest.mark.parametrize("lesson", LESSONS)
def test_student_notebook_matches_fresh_release(released_course, lesson):
    committed = NOTEBOOKS / f"{lesson}.ipynb"
    assert committed.exists(), f"{committed} is missing: run `python -m autograder release`"
    fresh = released_course / "release" / lesson / f"{lesson}.ipynb"
    assert committed.read_text() == fresh.read_text(), (
        f"{committed.name} is out of date with solutions/: run `python -m autograder release {lesson}` "
        "(never edit notebooks/ by hand)")


@pytest.mark.parametrize("lesson", LESSONS)
def test_student_notebook_has_no_solutions_hidden_tests_or_outputs(lesson):
    nb = load(NOTEBOOKS / f"{lesson}.ipynb")
    text = "\n".join(c.source for c in nb.cells)
    for marker in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
        assert marker not in text, f"{lesson}: the student copy contains {marker!r}"
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{lesson}: outputs committed"


def test_every_lesson_has_a_student_notebook():
    assert LESSONS, "no solution notebooks found in solutions/"
    assert sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) == LESSONS
