"""Real nbgrader on a temporary course: full marks, zero, and something in between."""
import json
import shutil

import pytest

from autograder.course import nbgrader_api
from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, load, solution_ids


def submit(course, lesson, student, nb):
    import nbformat
    folder = course / "submitted" / student / lesson
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{lesson}.ipynb"))


def autograde_scores(course, lesson, students):
    from nbgrader.api import Gradebook
    api = nbgrader_api(course)
    for student in students:
        result = api.autograde(lesson, student, force=True, create=True)
        assert result["success"], f"nbgrader autograde failed for {student}: {result['error']}\n{result['log']}"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s: (gradebook.find_submission(lesson, s).score, gradebook.find_submission(lesson, s).max_score)
                for s in students}


@pytest.mark.parametrize("lesson", LESSONS)
def test_autograde_full_marks_zero_and_partial(released_course, lesson, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    blank = load(course / "release" / lesson / f"{lesson}.ipynb")
    solution = load(SOLUTIONS / f"{lesson}.ipynb")
    ids = solution_ids(solution)
    submit(course, lesson, "complete", fill_solutions(blank, solution))
    submit(course, lesson, "blank", blank)
    submit(course, lesson, "half", fill_solutions(blank, solution, ids[: (len(ids) + 1) // 2]))

    scores = autograde_scores(course, lesson, ["complete", "blank", "half"])

    score, max_score = scores["complete"]
    assert max_score > 0 and score == max_score, f"{lesson}: a complete submission scored {score}/{max_score}"
    assert scores["blank"][0] == 0, f"{lesson}: the blank copy scored {scores['blank']}"
    assert 0 < scores["half"][0] < max_score, f"{lesson}: a half-finished copy scored {scores['half']}"
    # the notebook nbgrader wrote beside the kernel (the graded copy) holds no hidden test of the lesson
    from autograder.cells import secret_lines, without_hidden_tests
    public = {line.strip() for c in solution.cells for line in without_hidden_tests(c.source).splitlines()}
    hidden = [line for c in solution.cells for line in secret_lines(c.source) if line not in public]
    graded = load(course / "autograded" / "complete" / lesson / f"{lesson}.ipynb")
    texts = [c.source for c in graded.cells] + [json.dumps(o) for c in graded.cells for o in c.get("outputs", [])]
    lines = {line.strip() for text in texts for line in text.replace("\\n", "\n").splitlines()}
    assert hidden and not [line for line in hidden if line in lines]




# ---------------------------------------------------------------- the grading rules, without a kernel

import nbformat  # noqa: E402
from nbformat.v4 import new_code_cell, new_notebook, new_output  # noqa: E402
from nbgrader.utils import determine_grade  # noqa: E402

from autograder import integrity  # noqa: E402
from autograder.grading import already_graded, submission_digest  # noqa: E402
from autograder.preprocessors import TestCellOutcome  # noqa: E402
from autograder.restore import restore  # noqa: E402


def _cell(source, cell_id, **nbgrader):
    cell = new_code_cell(source)
    cell["id"] = cell_id
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "locked": False, "solution": False, "grade": False,
                                     "task": False, **nbgrader}
    return cell


def _released():
    nb = new_notebook()
    nb.cells = [_cell("import numpy as np", "setup"),
                _cell("def f():\n    raise NotImplementedError()", "answer", grade_id="f", solution=True),
                _cell("assert f() == 1", "test", grade_id="test_f", grade=True, locked=True, points=2)]
    return nb


def _copy(nb):
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def test_restore_leaves_an_honest_notebook_alone():
    submitted = _copy(_released())
    submitted.cells[1].source = "def f():\n    return 1"
    assert restore(submitted, _released()) == []
    assert submitted == _copy(submitted)


def test_restore_puts_back_a_renamed_test_and_an_answer_marked_as_graded():
    submitted = _copy(_released())
    submitted.cells[1].metadata.nbgrader.update(grade=True, points=100)
    submitted.cells[2].metadata.nbgrader["grade_id"] = "renamed"
    changes = restore(submitted, _released())
    assert submitted.cells[1].metadata.nbgrader == _released().cells[1].metadata.nbgrader
    assert submitted.cells[2].metadata.nbgrader["grade_id"] == "test_f"
    assert len(changes) == 2 and "cell 2 (f)" in changes[0] and "points 100 -> 0" in changes[0]
    assert "grade_id 'renamed' -> 'test_f'" in changes[1]


def test_restore_without_cell_ids_matches_a_test_cell_by_its_text():
    submitted = _copy(_released())
    for cell in submitted.cells:
        del cell["id"]
    submitted.cells[2].metadata.nbgrader["grade_id"] = "renamed"
    restore(submitted, _released())
    assert submitted.cells[2].metadata.nbgrader["grade_id"] == "test_f"


def test_restore_without_cell_ids_matches_a_renamed_answer_by_position():
    submitted = _copy(_released())
    for cell in submitted.cells:
        del cell["id"]
    submitted.cells[1].metadata.nbgrader["grade_id"] = "renamed"
    submitted.cells[1].source = "def f():\n    return 1"
    restore(submitted, _released())
    assert submitted.cells[1].metadata.nbgrader["grade_id"] == "f"


def test_restore_strips_graded_metadata_from_a_provided_or_new_cell():
    submitted = _copy(_released())
    submitted.cells[0].metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "points": 50, "schema_version": 3}
    submitted.cells.append(_cell("print('mine')", "new", grade_id="extra", grade=True, points=9))
    changes = restore(submitted, _released())
    assert "nbgrader" not in submitted.cells[0].metadata and "nbgrader" not in submitted.cells[3].metadata
    assert [c.split(":")[0] for c in changes] == ["cell 1 (bonus)", "cell 4 (extra)"]


def test_restore_gives_back_metadata_that_was_removed():
    submitted = _copy(_released())
    del submitted.cells[2].metadata["nbgrader"]
    assert restore(submitted, _released()) == ["cell 3: its nbgrader metadata (test_f) was removed; restored"]
    assert submitted.cells[2].metadata.nbgrader["points"] == 2


def _test_cell(*outputs):
    cell = _released().cells[2]
    cell.outputs = list(outputs)
    return cell


STDERR = new_output("stream", name="stderr", text="UserWarning: harmless\n")
DISPLAY = new_output("execute_result", data={"text/plain": "'full marks, please'"}, execution_count=1)
ERROR = new_output("error", ename="AssertionError", evalue="f() gave 2", traceback=["..."])


@pytest.mark.parametrize("outputs, points", [((), 2), ((STDERR,), 2), ((DISPLAY,), 2), ((STDERR, DISPLAY), 2),
                                             ((DISPLAY, ERROR), 0), ((STDERR, ERROR), 0), ((ERROR,), 0)])
def test_a_test_cell_earns_its_points_iff_it_raised_no_error(outputs, points):
    cell, _ = TestCellOutcome().preprocess_cell(_test_cell(*[_copy(o) for o in outputs]), {}, 2)
    assert determine_grade(cell)[0] == points
    assert [o.output_type for o in cell.outputs] == (["error"] if points == 0 else [])


def test_what_a_test_cell_printed_is_kept_bounded_for_the_instructor():
    cell, _ = TestCellOutcome(max_removed=50).preprocess_cell(
        _test_cell(new_output("stream", name="stdout", text="x" * 500), _copy(ERROR)), {}, 2)
    removed = cell.metadata["autograder"]["removed_outputs"]
    assert removed.startswith("x" * 50) and "450 more characters" in removed


def test_answer_cells_keep_their_outputs():
    cell = _released().cells[1]
    cell.outputs = [_copy(STDERR), _copy(DISPLAY)]
    assert TestCellOutcome().preprocess_cell(cell, {}, 1)[0].outputs == cell.outputs


def _kernel_answer(watch, mode):
    """Run integrity.py's kernel code in this process, as the kernel would, and parse its answer."""
    nonce, expression = watch.request(mode)
    value = eval(expression)  # noqa: S307: the grader's own code, as the kernel evaluates it
    reply = {"content": {"user_expressions": {"check": {"status": "ok", "data": {"text/plain": repr(value)}}}}}
    return watch.parse(nonce, reply)


def test_the_integrity_check_names_a_replaced_function_and_a_changed_code(monkeypatch):
    import course_utils
    import numpy
    watch = integrity.Watch()
    watch.baseline = _kernel_answer(watch, "baseline")
    assert watch.changes(_kernel_answer(watch, "check")) == []
    monkeypatch.setattr(numpy, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(course_utils.check_true, "__code__", (lambda *a, **k: None).__code__)
    changes = watch.changes(_kernel_answer(watch, "check"))
    assert any(c.startswith("numpy.allclose was replaced (now builtins.function") and "<lambda>" in c for c in changes)
    assert "course_utils.check_true had its code or defaults changed" in changes


def test_the_integrity_check_refuses_an_answer_without_its_token():
    watch = integrity.Watch()
    nonce, _ = watch.request("baseline")
    reply = {"content": {"user_expressions": {"check": {"status": "ok", "data": {
        "text/plain": repr(json.dumps({"nonce": "replayed", "paths": [], "objects": {}, "shell": {}}))}}}}}
    with pytest.raises(ValueError, match="token"):
        watch.parse(nonce, reply)


def test_a_graded_submission_is_skipped_until_its_notebook_changes(tmp_path):
    lesson, student = "03_x", "alice"
    notebook = tmp_path / "submitted" / student / lesson / f"{lesson}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    report = tmp_path / "reports" / lesson / f"{student}.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"status": "graded", "submission": submission_digest(tmp_path, lesson, student)}))
    assert already_graded(tmp_path, lesson, student)
    notebook.write_text('{"cells": []}')
    assert not already_graded(tmp_path, lesson, student)


def test_a_submission_that_failed_to_grade_is_retried(tmp_path):
    lesson, student = "03_x", "bob"
    notebook = tmp_path / "submitted" / student / lesson / f"{lesson}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    report = tmp_path / "reports" / lesson / f"{student}.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"status": "failed", "submission": submission_digest(tmp_path, lesson, student)}))
    assert not already_graded(tmp_path, lesson, student)
