"""Grades in the shapes learning-management systems import: a Canvas gradebook CSV and a Moodle grade-import CSV.

Both have one row per student in the gradebook and one column per lesson, holding the
lesson's score after late penalties and after any score the instructor overrode in
formgrader (nbgrader's `Submission.score`); a lesson not submitted scores 0, and a lesson with a test cell
left for manual grading (the grader could not run it) is blank, no grade, until it is graded in formgrader.

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

Each format is an nbgrader ExportPlugin (LmsExportPlugin: a file name, a header, one row per
student), listed in LMS_EXPORTS: `python -m autograder export` writes every one, and plain
nbgrader writes one with `nbgrader export --exporter=autograder.lms.CanvasExportPlugin --to canvas.csv`.
A new LMS format is one new subclass added to LMS_EXPORTS (docs/design.md shows one).

Both files are written by csvsafe.safe_writer: every field quoted, and a name or email that a
spreadsheet would run as a formula (it begins with = + - @, a tab or a line break) starts
with a single quote; the scores are plain numbers, which both importers read.
"""
from pathlib import Path

from nbgrader.plugins import ExportPlugin

from .csvsafe import write_csv
from .gradebook import final_score

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["First name", "Last name", "ID number", "Email address"]


def scores(gb, lessons=(), students=()):
    """([lesson], {lesson: max score}, [(student, {lesson: score})]) from an nbgrader Gradebook, for the
    given lessons and students only if any are given (nbgrader's `--assignment` and `--student`)."""
    from nbgrader.api import MissingEntry
    points = {a.name: a.max_score for a in gb.assignments if not lessons or a.name in lessons}
    lessons = sorted(points)
    rows = []
    for student in sorted(gb.students, key=lambda s: s.id):
        if students and student.id not in students:
            continue
        got = {}
        for lesson in lessons:
            try:
                sub = gb.find_submission(lesson, student.id)
            except MissingEntry:
                got[lesson] = 0.0
            else:
                got[lesson] = final_score(sub)  # None while a test cell is pending
        rows.append((student, got))
    return lessons, points, rows


def number(x):
    """A score as the importers read it; a pending one (None: a test cell awaits manual grading) is left blank,
    which Canvas and Moodle import as no grade, never as 0."""
    return "" if x is None else f"{x:g}"


class LmsExportPlugin(ExportPlugin):
    """One learning-management system's grade-import CSV: one row per student, one column per lesson.

    A subclass names its `filename` and `system`, and says what comes before the students
    (`header`) and what one student's row holds (`row`); the scores, the quoting and the
    formula-safe fields are done here.
    """
    filename = "lms.csv"
    system = "an LMS"

    def header(self, lessons, points):
        raise NotImplementedError

    def row(self, student, got, lessons):
        raise NotImplementedError

    def export(self, gradebook):
        lessons, points, rows = scores(gradebook, [str(a) for a in self.assignment], [str(s) for s in self.student])
        dest = self.to or self.filename
        write_csv(dest, self.header(lessons, points) + [self.row(student, got, lessons) for student, got in rows])
        return Path(dest)


class CanvasExportPlugin(LmsExportPlugin):
    """Canvas's Grades > Import: Student, ID, SIS User ID, SIS Login ID, Section, the lessons; a Points Possible row."""
    filename, system = "canvas.csv", "Canvas gradebook import"

    def header(self, lessons, points):
        return [CANVAS_COLUMNS + lessons, ["Points Possible", "", "", "", ""] + [number(points[l]) for l in lessons]]

    def row(self, student, got, lessons):
        name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
        return [name, student.lms_user_id or "", student.id, student.id, ""] + [number(got[l]) for l in lessons]


class MoodleExportPlugin(LmsExportPlugin):
    """Moodle's Grade administration > Import > CSV file: First name, Last name, ID number, Email address, the lessons."""
    filename, system = "moodle.csv", "Moodle grade import"

    def header(self, lessons, points):
        return [MOODLE_COLUMNS + lessons]

    def row(self, student, got, lessons):
        return [student.first_name or "", student.last_name or "", student.id, student.email or ""] + [
            number(got[l]) for l in lessons]


LMS_EXPORTS = [CanvasExportPlugin, MoodleExportPlugin]  # `python -m autograder export` writes each of these


def export_lms(gb, out_dir, log=print):
    """Every LMS_EXPORTS file in out_dir from an open nbgrader Gradebook; returns their paths."""
    paths = [plugin(to=str(Path(out_dir) / plugin.filename)).export(gb) for plugin in LMS_EXPORTS]
    log("wrote " + ", ".join(f"{path} ({plugin.system})" for path, plugin in zip(paths, LMS_EXPORTS)))
    return tuple(paths)
