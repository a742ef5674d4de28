"""run/grading.py's resume rule: a graded submission is skipped until its notebook changes; a failed one is retried."""
import json

from autograder.course import submission_paths
from autograder.run.grading import already_graded, submission_digest

LESSON = "03_x"


def _handed_in_and_reported(course, student, status):
    """A submitted notebook and a report of `status` for exactly that notebook; returns the notebook's path."""
    notebook = course / "submitted" / student / LESSON / f"{LESSON}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    report = course / "reports" / LESSON / f"{student}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"status": status, "submission": submission_digest(submission_paths(course, LESSON, student))}))
    return notebook


def test_a_graded_submission_is_skipped_until_its_notebook_changes(tmp_path):
    notebook = _handed_in_and_reported(tmp_path, "alice", "graded")
    assert already_graded(submission_paths(tmp_path, LESSON, "alice"))
    notebook.write_text('{"cells": []}')
    assert not already_graded(submission_paths(tmp_path, LESSON, "alice"))


def test_a_submission_that_failed_to_grade_is_retried(tmp_path):
    _handed_in_and_reported(tmp_path, "bob", "failed")
    assert not already_graded(submission_paths(tmp_path, LESSON, "bob"))
