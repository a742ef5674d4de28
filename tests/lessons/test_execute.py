"""Every solution notebook runs cleanly, in full and in fast mode, and the measured experiments leave their curves.

The plain runs are the `solution_runs` fixture (tests/graded_class.py: the website's full-mode runs when the
site is built, as in CI, else fast-mode runs); the grader runs every `complete` submission of the graded class
in fast mode, so fast mode is checked there whichever runs the fixture holds, and the curves are printed by
those runs too. The unstarted copies are checked where they are graded (tests/lessons/test_grading.py).
"""
import pytest

from tests.graded_class import CURVES
from tests.nbtools import LESSONS, errors, is_test, read_json_variable, stderr_text


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_solution_runs_without_errors(solution_runs, lesson):
    nb = solution_runs[lesson]
    assert errors(nb) == [], f"{lesson}: errors in the solution notebook: {errors(nb)}"
    for cell in nb.cells:
        if is_test(cell):
            assert stderr_text(cell) == "", (f"{lesson}: a test cell wrote to stderr (noise a student would take "
                                             f"for a problem): {stderr_text(cell)[:500]}")


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_solution_runs_without_errors_in_fast_mode_when_graded(graded_class, lesson):
    nb = graded_class.autograded(lesson, "complete")
    assert errors(nb) == [], f"{lesson}: errors when the complete submission was graded (fast mode): {errors(nb)}"


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if lesson[:2] in CURVES])
def test_the_experiment_measures_accuracy_by_length(graded_class, lesson):
    curves = read_json_variable(graded_class.autograded(lesson, "complete"), "accuracy_by_length")
    assert set(CURVES[lesson[:2]]) <= set(curves), f"{lesson}: accuracy_by_length has keys {sorted(curves)}"
    for name, by_length in curves.items():
        lengths = [int(n) for n in by_length]
        assert lengths == sorted(lengths) and min(lengths) <= 10 and max(lengths) >= 30, (name, lengths)
        assert all(isinstance(a, float) and 0.0 <= a <= 1.0 for a in by_length.values()), (name, by_length)
