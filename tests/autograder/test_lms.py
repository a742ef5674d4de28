"""LMS exports: a Canvas gradebook import CSV and a Moodle grade-import CSV from the nbgrader gradebook."""
import csv
import shutil

import pytest

from autograder.lms import CANVAS_COLUMNS, MOODLE_COLUMNS, export_lms

LESSONS = ["01_seq2seq_bottleneck", "02_bahdanau_attention"]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A gradebook with two lessons (two test cells of 3 and 2 points each) and four students."""
    from nbgrader.api import Gradebook
    path = tmp_path_factory.mktemp("gb") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}") as gb:
        for lesson in LESSONS:
            gb.add_assignment(lesson)
            gb.add_notebook(lesson, lesson)
            gb.add_grade_cell("test_a", lesson, lesson, max_score=3, cell_type="code")
            gb.add_grade_cell("test_b", lesson, lesson, max_score=2, cell_type="code")
        gb.add_student("ann", first_name="Ann", last_name="Lee", email="ann@uni.edu", lms_user_id="4711")
        gb.add_student("bo", first_name="Bo, Jr.", last_name="Ødegård")
        gb.add_student("cy")
        gb.add_student("di")
        for student, lesson, a, b in [("ann", LESSONS[0], 3, 2), ("ann", LESSONS[1], 3, 0),
                                      ("bo", LESSONS[0], 0, 2), ("di", LESSONS[0], 3, 2)]:
            gb.add_submission(lesson, student)
            gb.find_grade("test_a", lesson, lesson, student).auto_score = a
            gb.find_grade("test_b", lesson, lesson, student).auto_score = b
        gb.find_grade("test_b", LESSONS[1], LESSONS[1], "ann").manual_score = 1.5  # overridden in formgrader
        gb.find_submission_notebook(LESSONS[0], LESSONS[0], "di").late_submission_penalty = 1
        gb.db.commit()
    return path


@pytest.fixture
def exported(template, tmp_path):
    from nbgrader.api import Gradebook
    shutil.copyfile(template, tmp_path / "gradebook.db")
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        return export_lms(gb, tmp_path, log=lambda *_: None)


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_csv_has_canvas_columns_points_possible_and_one_column_per_lesson(exported):
    canvas, _ = exported
    assert CANVAS_COLUMNS == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # Canvas's own export
    assert _rows(canvas) == [
        CANVAS_COLUMNS + LESSONS,
        ["Points Possible", "", "", "", "", "5", "5"],
        ["Lee, Ann", "4711", "ann", "ann", "", "5", "4.5"],
        ["Ødegård, Bo, Jr.", "", "bo", "bo", "", "2", "0"],
        ["cy", "", "cy", "cy", "", "0", "0"],
        ["di", "", "di", "di", "", "4", "0"],
    ]


def test_moodle_csv_has_moodle_export_columns_and_one_column_per_lesson(exported):
    _, moodle = exported
    assert MOODLE_COLUMNS == ["First name", "Last name", "ID number", "Email address"]  # Moodle's own export
    assert _rows(moodle) == [
        MOODLE_COLUMNS + LESSONS,
        ["Ann", "Lee", "ann", "ann@uni.edu", "5", "4.5"],
        ["Bo, Jr.", "Ødegård", "bo", "", "2", "0"],
        ["", "", "cy", "", "0", "0"],
        ["", "", "di", "", "4", "0"],
    ]


def test_a_name_with_a_comma_is_quoted_not_split(exported):
    canvas, moodle = exported
    assert '"Ødegård, Bo, Jr.","","bo","bo","","2","0"' in canvas.read_text(encoding="utf-8").splitlines()
    assert '"Bo, Jr.","Ødegård","bo","","2","0"' in moodle.read_text(encoding="utf-8").splitlines()


def test_plain_nbgrader_export_writes_the_same_canvas_file(template, exported, tmp_path):
    """Each LMS format is an nbgrader ExportPlugin: `nbgrader export --exporter=...` writes the same bytes."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    course = tmp_path / "plain"
    course.mkdir()
    shutil.copyfile(template, course / "gradebook.db")
    out = tmp_path / "plain-canvas.csv"
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--JupyterApp.config_file=autograder/nbgrader_config.py",
                           f"--CourseDirectory.root={course}", f"--to={out}",
                           "--exporter=autograder.lms.CanvasExportPlugin"],
                          cwd=repo, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_bytes() == exported[0].read_bytes()


def test_a_new_lms_format_is_one_class_in_the_registry(template, tmp_path, monkeypatch):
    from nbgrader.api import Gradebook
    from autograder import lms

    class Brightspace(lms.LmsExportPlugin):
        filename, system = "brightspace.csv", "Brightspace import"

        def header(self, lessons, points):
            return [["OrgDefinedId"] + [f"{l} Points Grade" for l in lessons] + ["End-of-Line Indicator"]]

        def row(self, student, got, lessons):
            return [f"#{student.id}"] + [lms.number(got[l]) for l in lessons] + ["#"]

    monkeypatch.setattr(lms, "LMS_EXPORTS", lms.LMS_EXPORTS + [Brightspace])
    shutil.copyfile(template, tmp_path / "gradebook.db")
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        paths = export_lms(gb, tmp_path, log=lambda *_: None)
    assert [p.name for p in paths] == ["canvas.csv", "moodle.csv", "brightspace.csv"]
    assert _rows(paths[2])[1] == ["#ann", "5", "4.5", "#"]
