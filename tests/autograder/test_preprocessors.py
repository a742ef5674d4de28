"""preprocessors: a test cell earns its points if and only if it raised no error (TestCellOutcome)."""
import pytest
from nbformat.v4 import new_output
from nbgrader.utils import determine_grade

from autograder.preprocessors import TestCellOutcome
from tests.autograder import tiny


def _test_cell(*outputs):
    cell = tiny.released().cells[2]
    cell.outputs = list(outputs)
    return cell


STDERR = new_output("stream", name="stderr", text="UserWarning: harmless\n")
DISPLAY = new_output("execute_result", data={"text/plain": "'full marks, please'"}, execution_count=1)
ERROR = new_output("error", ename="AssertionError", evalue="f() gave 2", traceback=["..."])


@pytest.mark.parametrize("outputs, points", [((), 2), ((STDERR,), 2), ((DISPLAY,), 2), ((STDERR, DISPLAY), 2),
                                             ((DISPLAY, ERROR), 0), ((STDERR, ERROR), 0), ((ERROR,), 0)])
def test_a_test_cell_earns_its_points_iff_it_raised_no_error(outputs, points):
    cell, _ = TestCellOutcome().preprocess_cell(_test_cell(*[tiny.copy(o) for o in outputs]), {}, 2)
    assert determine_grade(cell)[0] == points
    assert [o.output_type for o in cell.outputs] == (["error"] if points == 0 else [])


def test_what_a_test_cell_printed_is_kept_bounded_for_the_instructor():
    cell, _ = TestCellOutcome(max_removed=50).preprocess_cell(
        _test_cell(new_output("stream", name="stdout", text="x" * 500), tiny.copy(ERROR)), {}, 2)
    removed = cell.metadata["autograder"]["removed_outputs"]
    assert removed.startswith("x" * 50) and "450 more characters" in removed


def test_answer_cells_keep_their_outputs():
    cell = tiny.released().cells[1]
    cell.outputs = [tiny.copy(STDERR), tiny.copy(DISPLAY)]
    assert TestCellOutcome().preprocess_cell(cell, {}, 1)[0].outputs == cell.outputs
