"""Every solution runs cleanly in fast mode; every blank student copy fails only in the expected ways."""
import pytest

from tests.nbtools import (EXPECTED_STUDENT_ERRORS, LESSONS, NOTEBOOKS, SOLUTIONS, errors, execute, is_test,
                     json_variable_cell, load, read_json_variable, stderr_text)

# lessons whose measured experiment leaves accuracy_by_length = {model: {length: accuracy}}
CURVES = {"01": ["no_attention"], "02": ["no_attention", "bahdanau"]}


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_runs_without_errors_in_fast_mode(lesson, tmp_path):
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    curves_expected = CURVES.get(lesson[:2])
    if curves_expected:
        nb.cells.append(json_variable_cell("accuracy_by_length"))
    nb = execute(nb, fast=True, cwd=tmp_path)
    assert errors(nb) == [], f"{lesson}: errors in the solution notebook: {errors(nb)}"
    for cell in nb.cells:
        if is_test(cell):
            assert stderr_text(cell) == "", f"{lesson}: test cell wrote to stderr (nbgrader would score it 0): " \
                                            f"{stderr_text(cell)[:500]}"
    if curves_expected:
        curves = read_json_variable(nb, "accuracy_by_length")
        assert set(curves_expected) <= set(curves), f"{lesson}: accuracy_by_length has keys {sorted(curves)}"
        for name, by_length in curves.items():
            lengths = [int(n) for n in by_length]
            assert lengths == sorted(lengths) and min(lengths) <= 10 and max(lengths) >= 30, (name, lengths)
            assert all(isinstance(a, float) and 0.0 <= a <= 1.0 for a in by_length.values()), (name, by_length)


@pytest.mark.parametrize("lesson", LESSONS)
def test_blank_student_copy_fails_only_with_unfinished_exercises(lesson, tmp_path):
    nb = execute(load(NOTEBOOKS / f"{lesson}.ipynb"), fast=True, cwd=tmp_path)
    found = errors(nb)
    assert found, f"{lesson}: the blank student copy raised nothing: are the exercises really removed?"
    unexpected = [e for e in found if e[1] not in EXPECTED_STUDENT_ERRORS]
    assert unexpected == [], f"{lesson}: unexpected errors in the blank student copy (cell, error, message): {unexpected}"
    not_run = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.execution_count is None]
    assert not_run == [], f"{lesson}: cells {not_run} never ran (did the kernel stop?)"
