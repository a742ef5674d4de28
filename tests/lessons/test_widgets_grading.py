"""Widgets under grading: autograding a submission that builds explorers never hangs or times out.

The submission is what a student hands in after running the whole notebook in
Jupyter: outputs, widget views and the saved widget state. Real nbgrader
autogrades it in a subprocess with a hard wall-clock limit (so a hang fails
the test instead of blocking CI); every explorer cell must run without error,
display its widget, and finish far inside nbgrader's per-cell timeout.
"""
import json
import os
import subprocess
import sys
from datetime import datetime

import nbformat
import pytest

from autograder.course import load_config
from autograder.nbrun import NotebookClient
from tests.nbtools import LESSONS, REPO, SOLUTIONS, fill_solutions, load

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
HARD_LIMIT_S = 900  # the whole autograde, enforced from outside: a hang fails here


def explorer_cell_ids(nb):
    return [c.get("id") for c in nb.cells if c.cell_type == "code" and "course_utils.explorers" in c.source]


LESSONS_WITH_EXPLORERS = [lesson for lesson in LESSONS if explorer_cell_ids(load(SOLUTIONS / f"{lesson}.ipynb"))]


def _seconds(cell):
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))
    return (parse(end) - parse(start)).total_seconds()


@pytest.mark.parametrize("lesson", LESSONS_WITH_EXPLORERS)
def test_autograding_a_submission_with_built_explorers_finishes_quickly(released_course, tmp_path, lesson):
    import shutil
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    blank = load(course / "release" / lesson / f"{lesson}.ipynb")
    submission = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"))
    # run it as the student did, keeping the widget state Jupyter saves with the notebook
    env_before = os.environ.get("COURSE_FAST")
    os.environ["COURSE_FAST"] = "1"
    try:
        NotebookClient(submission, timeout=300, kernel_name="python3", allow_errors=True,
                       store_widget_state=True, resources={"metadata": {"path": str(REPO)}}).execute()
    finally:
        if env_before is None:
            os.environ.pop("COURSE_FAST", None)
        else:
            os.environ["COURSE_FAST"] = env_before
    assert WIDGET_STATE in submission.metadata.get("widgets", {}), "the submission should carry saved widget state"
    folder = course / "submitted" / "student" / lesson
    folder.mkdir(parents=True)
    nbformat.write(submission, str(folder / f"{lesson}.ipynb"))

    script = ("import json, sys; from autograder.course import nbgrader_api; "
              f"r = nbgrader_api({str(course)!r}).autograde({lesson!r}, 'student', force=True, create=True); "
              "print('@@' + json.dumps({'success': r['success'], 'error': r.get('error'), 'log': r.get('log')}))")
    try:
        done = subprocess.run([sys.executable, "-c", script], cwd=str(REPO), capture_output=True, text=True,
                              timeout=HARD_LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{lesson}: autograding a submission with built explorers did not finish in {HARD_LIMIT_S} s")
    assert "@@" in done.stdout, f"autograde crashed:\n{done.stdout}\n{done.stderr}"
    result = json.loads(done.stdout.split("@@", 1)[1])
    assert result["success"], f"{lesson}: nbgrader autograde failed: {result['error']}\n{result['log']}"

    graded = load(course / "autograded" / "student" / lesson / f"{lesson}.ipynb")
    per_cell_limit = load_config(course).Execute.timeout
    ids = explorer_cell_ids(graded)
    assert ids, "the autograded copy lost its explorer cells"
    for cell in graded.cells:
        if cell.get("id") not in ids:
            continue
        outputs = cell.get("outputs", [])
        assert not [o for o in outputs if o.output_type == "error"], f"{lesson}: explorer cell raised under grading"
        assert any(WIDGET_VIEW in o.get("data", {}) for o in outputs), f"{lesson}: explorer displayed no widget"
        seconds = _seconds(cell)
        assert seconds is not None, "nbgrader recorded no timing for the explorer cell"
        assert seconds < per_cell_limit / 4, (
            f"{lesson}: building the explorer took {seconds:.0f} s under grading; nbgrader stops a cell at "
            f"{per_cell_limit} s")

    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        sub = gradebook.find_submission(lesson, "student")
        assert sub.max_score > 0 and sub.score == sub.max_score, f"{lesson}: scored {sub.score}/{sub.max_score}"
