"""restore.py: a submission's nbgrader metadata is put back as released, whatever the student changed."""
from autograder.restore import restore
from tests.autograder import tiny


def test_restore_leaves_an_honest_notebook_alone():
    submitted = tiny.copy(tiny.released())
    submitted.cells[1].source = "def f():\n    return 1"
    assert restore(submitted, tiny.released()) == []
    assert submitted == tiny.copy(submitted)


def test_restore_puts_back_a_renamed_test_and_an_answer_marked_as_graded():
    submitted = tiny.copy(tiny.released())
    submitted.cells[1].metadata.nbgrader.update(grade=True, points=100)
    submitted.cells[2].metadata.nbgrader["grade_id"] = "renamed"
    changes = restore(submitted, tiny.released())
    assert submitted.cells[1].metadata.nbgrader == tiny.released().cells[1].metadata.nbgrader
    assert submitted.cells[2].metadata.nbgrader["grade_id"] == "test_f"
    assert len(changes) == 2 and "cell 2 (f)" in changes[0] and "points 100 -> 0" in changes[0]
    assert "grade_id 'renamed' -> 'test_f'" in changes[1]


def test_restore_without_cell_ids_matches_a_test_cell_by_its_text():
    submitted = tiny.copy(tiny.released())
    for cell in submitted.cells:
        del cell["id"]
    submitted.cells[2].metadata.nbgrader["grade_id"] = "renamed"
    restore(submitted, tiny.released())
    assert submitted.cells[2].metadata.nbgrader["grade_id"] == "test_f"


def test_restore_without_cell_ids_matches_a_renamed_answer_by_position():
    submitted = tiny.copy(tiny.released())
    for cell in submitted.cells:
        del cell["id"]
    submitted.cells[1].metadata.nbgrader["grade_id"] = "renamed"
    submitted.cells[1].source = "def f():\n    return 1"
    restore(submitted, tiny.released())
    assert submitted.cells[1].metadata.nbgrader["grade_id"] == "f"


def test_restore_strips_graded_metadata_from_a_provided_or_new_cell():
    submitted = tiny.copy(tiny.released())
    submitted.cells[0].metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "points": 50, "schema_version": 3}
    submitted.cells.append(tiny.cell("print('mine')", "new", grade_id="extra", grade=True, points=9))
    changes = restore(submitted, tiny.released())
    assert "nbgrader" not in submitted.cells[0].metadata and "nbgrader" not in submitted.cells[3].metadata
    assert [(c.kind, c.cell, c.text.split(":")[0]) for c in changes] == [("tamper", "bonus", "cell 1 (bonus)"),
                                                                          ("tamper", "extra", "cell 4 (extra)")]


def test_restore_gives_back_metadata_that_was_removed():
    submitted = tiny.copy(tiny.released())
    del submitted.cells[2].metadata["nbgrader"]
    (change,) = restore(submitted, tiny.released())
    assert (change.kind, change.cell, change.text) == ("tamper", "test_f",
                                                       "cell 3: its nbgrader metadata (test_f) was removed; restored")
    assert submitted.cells[2].metadata.nbgrader["points"] == 2
