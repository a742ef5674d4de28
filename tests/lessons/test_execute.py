"""Every lesson, its release copy filled with the solutions, runs cleanly in fast mode as a student runs it.

The runs are the `student_runs` fixture (tests/graded_class.py), which the graded class hands in as the
`complete` submissions; the unstarted copies are checked where they are graded (tests/lessons/test_grading.py).
"""
import pytest

from tests.graded_class import CURVES
from tests.nbtools import LESSONS, errors, is_test, read_json_variable, stderr_text


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_solutions_run_without_errors_in_fast_mode(student_runs, lesson):
    nb = student_runs[lesson]
    curves_expected = CURVES.get(lesson[:2])
    assert errors(nb) == [], f"{lesson}: errors in the notebook filled with the solutions: {errors(nb)}"
    for cell in nb.cells:
        if is_test(cell):
            assert stderr_text(cell) == "", (f"{lesson}: a test cell wrote to stderr (noise a student would take "
                                             f"for a problem): {stderr_text(cell)[:500]}")
    if curves_expected:
        curves = read_json_variable(nb, "accuracy_by_length")
        assert set(curves_expected) <= set(curves), f"{lesson}: accuracy_by_length has keys {sorted(curves)}"
        for name, by_length in curves.items():
            lengths = [int(n) for n in by_length]
            assert lengths == sorted(lengths) and min(lengths) <= 10 and max(lengths) >= 30, (name, lengths)
            assert all(isinstance(a, float) and 0.0 <= a <= 1.0 for a in by_length.values()), (name, by_length)
