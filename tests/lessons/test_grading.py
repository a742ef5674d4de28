"""Every lesson under `python -m autograder grade`: full marks, zero, something in between, nothing hidden leaked,
explorers that build quickly, and an unstarted copy that fails only where exercises are unfinished.

All of it reads the one graded class of the test run (tests/graded_class.py): each lesson's `complete`
submission (run in Jupyter first, outputs and widget state included), `unstarted` copy and `half` copy.
"""
import json
from datetime import datetime

import pytest

from autograder.cells import secret_lines, without_hidden_tests
from autograder.course import load_config
from tests.nbtools import EXPECTED_STUDENT_ERRORS, LESSONS, SOLUTIONS, errors, is_test, load

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def explorer_cell_ids(nb):
    return [c.get("id") for c in nb.cells if c.cell_type == "code" and "course_utils.explorers" in c.source]


LESSONS_WITH_EXPLORERS = [lesson for lesson in LESSONS if explorer_cell_ids(load(SOLUTIONS / f"{lesson}.ipynb"))]


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_complete_submission_earns_full_marks(graded_class, lesson):
    r = graded_class.results[lesson, "complete"]
    assert r.status == "graded" and r.max_score > 0 and r.score == r.max_score, r
    assert r.flags == [], r.flags


@pytest.mark.parametrize("lesson", LESSONS)
def test_an_unstarted_copy_earns_zero(graded_class, lesson):
    r = graded_class.results[lesson, "unstarted"]
    assert r.status == "graded" and r.score == 0 and r.flags == [], r


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_half_done_copy_earns_some_of_the_points(graded_class, lesson):
    r = graded_class.results[lesson, "half"]
    assert r.status == "graded" and 0 < r.score < r.max_score, r


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_graded_copy_beside_the_kernel_holds_no_hidden_test(graded_class, lesson):
    solution = load(SOLUTIONS / f"{lesson}.ipynb")
    public = {line.strip() for c in solution.cells for line in without_hidden_tests(c.source).splitlines()}
    hidden = [line for c in solution.cells for line in secret_lines(c.source) if line not in public]
    graded = graded_class.autograded(lesson, "complete")
    texts = [c.source for c in graded.cells] + [json.dumps(o) for c in graded.cells for o in c.get("outputs", [])]
    lines = {line.strip() for text in texts for line in text.replace("\\n", "\n").splitlines()}
    assert hidden and not [line for line in hidden if line in lines]  # whole lines: a short one can be in a public one


@pytest.mark.parametrize("lesson", LESSONS)
def test_an_unstarted_copy_fails_only_where_exercises_are_unfinished(graded_class, lesson):
    nb = graded_class.autograded(lesson, "unstarted")
    found = errors(nb)
    assert found, f"{lesson}: the unstarted copy raised nothing: are the exercises really removed?"
    unexpected = [e for e in found if e[1] not in EXPECTED_STUDENT_ERRORS]
    assert unexpected == [], f"{lesson}: unexpected errors in the unstarted copy (cell, error, message): {unexpected}"
    # test cells run on the grader's side (no execution count); every other code cell ran in the kernel
    not_run = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not is_test(c) and c.execution_count is None]
    assert not_run == [], f"{lesson}: cells {not_run} never ran (did the kernel stop?)"


def _seconds(cell):
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


@pytest.mark.parametrize("lesson", LESSONS_WITH_EXPLORERS)
def test_explorers_saved_with_the_submission_build_quickly_under_grading(graded_class, lesson):
    assert WIDGET_STATE in graded_class.completed[lesson].metadata.get("widgets", {}), \
        "the submission should carry the widget state Jupyter saves"
    graded = graded_class.autograded(lesson, "complete")
    per_cell_limit = load_config(graded_class.course).Execute.timeout
    ids = explorer_cell_ids(graded)
    assert ids, "the autograded copy lost its explorer cells"
    for cell in (c for c in graded.cells if c.get("id") in ids):
        outputs = cell.get("outputs", [])
        assert not [o for o in outputs if o.output_type == "error"], f"{lesson}: explorer cell raised under grading"
        assert any(WIDGET_VIEW in o.get("data", {}) for o in outputs), f"{lesson}: explorer displayed no widget"
        seconds = _seconds(cell)
        assert seconds is not None, "the grader recorded no timing for the explorer cell"
        assert seconds < per_cell_limit / 4, (
            f"{lesson}: building the explorer took {seconds:.0f} s under grading; nbgrader stops a cell at "
            f"{per_cell_limit} s")
