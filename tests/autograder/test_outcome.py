"""outcome.py: the record of what grading found, and the resume rule read from it (a graded submission is skipped
until its notebook changes; a failed one is retried)."""
import json

import pytest

from autograder import outcome
from autograder.course import submission_paths
from autograder.job import Finding
from autograder.outcome import Outcome, already_graded

LESSON = "03_x"


def _handed_in_and_reported(course, student, status):
    """A submitted notebook and a report of `status` for exactly that notebook; returns the notebook's path."""
    notebook = course / "submitted" / student / LESSON / f"{LESSON}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    report = course / "reports" / LESSON / f"{student}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"lesson": LESSON, "student": student, "status": status,
                                  "submission": outcome.digest(submission_paths(course, LESSON, student))}))
    return notebook


def test_a_graded_submission_is_skipped_until_its_notebook_changes(tmp_path):
    notebook = _handed_in_and_reported(tmp_path, "alice", "graded")
    assert already_graded(submission_paths(tmp_path, LESSON, "alice"))
    notebook.write_text('{"cells": []}')
    assert not already_graded(submission_paths(tmp_path, LESSON, "alice"))


def test_a_submission_that_failed_to_grade_is_retried(tmp_path):
    _handed_in_and_reported(tmp_path, "bob", "failed")
    assert not already_graded(submission_paths(tmp_path, LESSON, "bob"))


def test_an_outcome_is_written_whole_and_read_back_the_same(tmp_path):
    paths = submission_paths(tmp_path, LESSON, "carol")
    found = Outcome(LESSON, "carol", score=2.0, max_score=4.0, seconds=3.5, pending=["test_b"], submission="ab",
                    flags=[Finding("patch", "line 2 changes np.allclose (numpy)")],
                    events=[Finding("grader", "could not run test_b", "test_b")])
    assert outcome.read(paths) is None
    outcome.write(paths, found)
    back = outcome.read(paths)
    assert back == found and [(f.kind, f.cell) for f in back.events] == [("grader", "test_b")]
    assert [p.name for p in paths.report.parent.iterdir()] == ["carol.json"], "no partial file is left behind"


@pytest.mark.parametrize("record, read", [
    ({"lesson": LESSON, "student": "dan", "score": 3, "seconds": "slow", "flags": "x", "pending": ["t", 7]},
     Outcome(LESSON, "dan", score=3.0, pending=["t"])),
    ({"lesson": LESSON, "student": "dan", "status": None, "flags": [{"kind": "eq", "text": "y", "cell": 7}]},
     Outcome(LESSON, "dan"))])
def test_a_report_is_read_as_data_a_field_of_the_wrong_type_is_its_default(record, read):
    assert Outcome.from_record(record) == read


@pytest.mark.parametrize("text", ["[]", "{}", '{"lesson": 3, "student": "x"}', "not json"])
def test_a_report_that_is_no_outcome_reads_as_none(tmp_path, text):
    paths = submission_paths(tmp_path, LESSON, "eve")
    paths.report.parent.mkdir(parents=True)
    paths.report.write_text(text)
    assert outcome.read(paths) is None and not already_graded(paths)
