"""Grades in the shapes learning-management systems import: a Canvas gradebook CSV and a Moodle grade-import CSV.

Both have one row per student in the gradebook and one column per lesson, holding the
lesson's score after late penalties and after any score the instructor overrode in
formgrader (nbgrader's `Submission.score`); a lesson not submitted scores 0.

Canvas (Grades > Import) reads the columns of its own gradebook export: `Student`
("Last, First"), `ID` (Canvas's user id), `SIS User ID`, `SIS Login ID` and `Section`,
then one column per assignment; a first data row named `Points Possible` gives each
assignment's points. Canvas matches a row by `ID`, else `SIS User ID`, else `SIS Login ID`:
`ID` is the student's `lms_user_id` in the gradebook (from a roster's `lms_user_id`
column), `SIS User ID` and `SIS Login ID` the nbgrader student id. A column named after a lesson that
Canvas does not have yet becomes a new assignment on import.

Moodle (Grade administration > Import > CSV file) reads the columns of its own grade
export: `First name`, `Last name`, `ID number`, `Email address`, then one column per grade
item. On import, map "ID number" to `useridnumber` (the nbgrader student id) or "Email
address" to `useremail`, and each lesson column to its grade item.

Both files are written by export.safe_writer: every field quoted, and a name or email that a
spreadsheet would run as a formula (it begins with = + - @, a tab or a line break) starts
with a single quote; the scores are plain numbers, which both importers read.
"""
from pathlib import Path

from .export import safe_writer

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["First name", "Last name", "ID number", "Email address"]


def scores(gb):
    """([lesson], {lesson: max score}, [(student, {lesson: score})]) from an nbgrader Gradebook."""
    from nbgrader.api import MissingEntry
    lessons = sorted(a.name for a in gb.assignments)
    points = {a.name: a.max_score for a in gb.assignments}
    rows = []
    for student in sorted(gb.students, key=lambda s: s.id):
        got = {}
        for lesson in lessons:
            try:
                sub = gb.find_submission(lesson, student.id)
            except MissingEntry:
                got[lesson] = 0.0
            else:
                got[lesson] = max(0.0, sub.score - (sub.late_submission_penalty or 0.0))
        rows.append((student, got))
    return lessons, points, rows


def _number(x):
    return f"{x:g}"


def write_canvas(path, lessons, points, rows):
    """A Canvas gradebook import CSV: Student, ID, SIS User ID, SIS Login ID, Section, one column per lesson."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = safe_writer(f)
        w.writerow(CANVAS_COLUMNS + lessons)
        w.writerow(["Points Possible", "", "", "", ""] + [_number(points[l]) for l in lessons])
        for student, got in rows:
            name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
            w.writerow([name, student.lms_user_id or "", student.id, student.id, ""]
                       + [_number(got[l]) for l in lessons])
    return Path(path)


def write_moodle(path, lessons, rows):
    """A Moodle grade-import CSV: First name, Last name, ID number, Email address, one column per lesson."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = safe_writer(f)
        w.writerow(MOODLE_COLUMNS + lessons)
        for student, got in rows:
            w.writerow([student.first_name or "", student.last_name or "", student.id, student.email or ""]
                       + [_number(got[l]) for l in lessons])
    return Path(path)


def export_lms(gb, out_dir, log=print):
    """canvas.csv and moodle.csv in out_dir from an open nbgrader Gradebook; returns their paths."""
    lessons, points, rows = scores(gb)
    canvas = write_canvas(Path(out_dir) / "canvas.csv", lessons, points, rows)
    moodle = write_moodle(Path(out_dir) / "moodle.csv", lessons, rows)
    log(f"wrote {canvas} (Canvas gradebook import) and {moodle} (Moodle grade import)")
    return canvas, moodle
