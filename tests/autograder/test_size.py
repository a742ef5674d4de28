"""Size limits: an absurd notebook is refused or trimmed before grading, with a `size:` flag, and what can be graded is."""
import json
import time

import nbformat
import pytest

from autograder import size
from autograder.course import submission_paths

LESSON = "01_demo"


def _lesson():
    nb = nbformat.v4.new_notebook()
    cells = [("intro", "markdown", "# Demo", {}),
             ("answer", "code", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", {"solution": True}),
             ("test_f", "code", "assert f() == 1", {"grade": True, "locked": True, "points": 1}),
             ("answer_g", "code", "def g():\n    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION",
              {"solution": True}),
             ("test_g", "code", "assert g() == 2", {"grade": True, "locked": True, "points": 1})]
    for gid, kind, source, meta in cells:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell.id = gid.replace("_", "-")
        cell.metadata["nbgrader"] = {"grade_id": gid, "schema_version": 3, "locked": False, "solution": False,
                                     "grade": False, **meta}
        nb.cells.append(cell)
    return nb


def _course(tmp_path, submitted):
    course = tmp_path / "course"
    for step in ("source", "release"):
        (course / step / LESSON).mkdir(parents=True)
        nbformat.write(_lesson(), str(course / step / LESSON / f"{LESSON}.ipynb"))
    folder = course / "submitted" / "ann" / LESSON
    folder.mkdir(parents=True)
    (folder / f"{LESSON}.ipynb").write_text(submitted if isinstance(submitted, str) else json.dumps(submitted))
    return course, folder / f"{LESSON}.ipynb"


def _padded(extra, at=(3, 5)):
    """The lesson answered, with `extra` one-line cells added, half after the first test, half at the end."""
    nb = _lesson()
    padding = [dict(cell_type="code", id=f"pad-{i}", metadata={}, source=f"x{i} = {i}", outputs=[],
                    execution_count=None) for i in range(extra)]
    nb.cells[at[0]:at[0]] = padding[:extra // 2]
    nb.cells += padding[extra // 2:]
    return nb


def test_a_notebook_with_100000_extra_cells_keeps_every_answer_and_test_and_is_flagged(tmp_path):
    course, path = _course(tmp_path, _padded(100_000))
    original = path.read_bytes()
    start = time.monotonic()
    flags = size.check(submission_paths(course, LESSON, "ann"))
    seconds = time.monotonic() - start
    print(f"size.check of 100,005 cells: {seconds:.1f} s")
    assert flags == ["size: the notebook has 100,005 cells (more than 500): graded with the 5 cells of the lesson "
                     "and the first 495 cells you added; 99,505 added cells were left out. The original is kept in "
                     "trimmed/ann/01_demo/ (autograder/size.py gives the limits)"]
    trimmed = nbformat.read(str(path), as_version=4)
    nbformat.validate(trimmed)
    assert len(trimmed.cells) == 500
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in trimmed.cells]
    assert [i for i in ids if i] == ["intro", "answer", "test_f", "answer_g", "test_g"]  # all kept, in order
    assert trimmed.cells[3].source == "x0 = 0" and trimmed.cells[-3].source == "x494 = 494"  # the first added ones
    assert (course / "trimmed/ann" / LESSON / f"{LESSON}.ipynb").read_bytes() == original
    assert seconds < 60, seconds  # (nbformat alone took 16 s to read and validate it on a loaded 2-core machine)
    assert size.check(submission_paths(course, LESSON, "ann")) == flags  # graded again (--force): the same flag


def test_a_notebook_within_the_limits_is_left_as_it_is(tmp_path):
    course, path = _course(tmp_path, _padded(400))
    before = path.read_bytes()
    assert size.check(submission_paths(course, LESSON, "ann")) == []
    assert path.read_bytes() == before and not (course / "trimmed").exists()


def test_a_notebook_over_the_byte_cap_is_refused_with_the_reason(tmp_path, monkeypatch):
    course, path = _course(tmp_path, _lesson())
    monkeypatch.setattr(size, "MAX_NOTEBOOK_BYTES", 1000)
    with pytest.raises(ValueError, match=r"^size: the notebook is 0 MB, more than the 0 MB a submission may be: "
                                         r"not graded \(remove large outputs and submit again\)$"):
        size.check(submission_paths(course, LESSON, "ann"))


def test_huge_outputs_are_removed_and_a_huge_cell_is_emptied_the_rest_kept(tmp_path, monkeypatch):
    nb = _lesson()
    nb.cells[1].source = "def f():\n    return 1\n" + "# padding\n" * 120_000  # 1.1 MiB of code in an answer
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * (21 << 20))]
    course, path = _course(tmp_path, nb)
    flags = size.check(submission_paths(course, LESSON, "ann"))
    assert flags == ["size: 21 MB of saved outputs (more than 20 MB) were removed; the code of cell 2 (more than 1 MB "
                     "each) was removed. The original is kept in trimmed/ann/01_demo/ (autograder/size.py gives the "
                     "limits)"]
    trimmed = nbformat.read(str(path), as_version=4)
    assert trimmed.cells[1].source.startswith("# autograder: this cell's 1.1 MB of code were removed")
    assert trimmed.cells[2].outputs == [] and trimmed.cells[4].source == "assert g() == 2"


def test_a_file_that_is_not_json_is_left_to_the_notebook_check(tmp_path):
    course, path = _course(tmp_path, "{ not json")
    assert size.check(submission_paths(course, LESSON, "ann")) == [] and path.read_text() == "{ not json"


def test_check_submission_trims_before_it_reads_and_flags(tmp_path):
    from autograder.run.grading import check_submission
    course, path = _course(tmp_path, _padded(2_000))
    flags = check_submission(submission_paths(course, LESSON, "ann"))
    assert [f for f in flags if f.startswith("size:")] == [
        "size: the notebook has 2,005 cells (more than 500): graded with the 5 cells of the lesson and the first "
        "495 cells you added; 1,505 added cells were left out. The original is kept in trimmed/ann/01_demo/ "
        "(autograder/size.py gives the limits)"]
    assert len(json.loads(path.read_text())["cells"]) == 500
