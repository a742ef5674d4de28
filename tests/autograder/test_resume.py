"""grading.py's resume rule: a graded submission is skipped until its notebook changes; a failed one is retried."""
import json

from autograder.grading import already_graded, submission_digest


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
