"""`export`: grades.csv, summary.csv, summary.md, canvas.csv and moodle.csv, safe to open in a spreadsheet.

Every CSV goes through csvsafe.safe_writer (every field quoted, no field a spreadsheet would run
as a formula, numbers as numbers).

CourseCsvExportPlugin is nbgrader's CsvExportPlugin (the same columns and rows) written that
way; `python -m autograder export` uses it, and so does plain `nbgrader export` with the
course's configuration (ExportApp.plugin_class), or with
`--exporter=autograder.export.CourseCsvExportPlugin`.
"""
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from . import outcome
from .course import submissions
from .csvsafe import write_csv
from .gradebook import final_score, pending
from .mdsafe import md_code, md_text
from .lms import export_lms

PENDING = "pending"  # the score of a submission with a test cell left for manual grading
GRADES_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                  "raw_score", "late_submission_penalty", "score", "max_score"]


class CourseCsvExportPlugin(ExportPlugin):
    """nbgrader's grades CSV (CsvExportPlugin's columns and values), every field quoted and formula-safe."""

    def export(self, gradebook):
        dest = self.to or "grades.csv"
        students = [str(s) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        self.log.info("Exporting grades to %s", dest)
        write_csv(dest, [GRADES_COLUMNS] + grade_rows(gradebook, assignments, students))


def grade_rows(gradebook, assignments=(), students=()):
    """CsvExportPlugin's rows (nbgrader 0.9): one per assignment and student, 0 for a missing submission, and
    PENDING as the score of a submission with a test cell left for manual grading (never a 0 it did not earn)."""
    rows = []
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        for student in gradebook.students:
            if students and student.id not in students:
                continue
            try:
                sub = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                timestamp, raw, penalty, score = "", 0.0, 0.0, 0.0
            else:
                timestamp, raw, penalty, score = sub.timestamp, sub.score, sub.late_submission_penalty, final_score(sub)
                if score is None:  # a test cell the grader could not run: no score until it is graded
                    raw = score = PENDING
            values = [assignment.name, assignment.duedate, timestamp, student.id, student.last_name,
                      student.first_name, student.email, raw, penalty, score, assignment.max_score]
            rows.append(["" if v is None else v if isinstance(v, (int, float)) else str(v) for v in values])
    return rows


def export(course_root, out_dir, log=print):
    """grades.csv (nbgrader's columns) and summary.csv / summary.md (per question, flags) in out_dir,
    plus canvas.csv and moodle.csv; returns (grades.csv, summary.md)."""
    from .gradebook import open_gradebook
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open_gradebook(course_root) as gb:
        CourseCsvExportPlugin(to=str(out_dir / "grades.csv")).export(gb)
        export_lms(gb, out_dir, log)  # canvas.csv, moodle.csv
        questions = _questions(gb)
    flagged = _flagged(course_root)
    write_csv(out_dir / "summary.csv", [
        ["assignment", "notebook", "cell", "max_points", "submissions", "full_marks", "failed", "mean", "pending"]] + [
        [q["assignment"], q["notebook"], q["cell"], q["max"], q["n"], q["full"], q["failed"], f"{q['mean']:.2f}",
         len(q["pending"])] for q in questions])
    from .collect import not_placed_summary  # files collect could not place, with the reason
    (out_dir / "summary.md").write_text(_summary_md(questions, flagged) + "".join(
        line + "\n" for line in not_placed_summary(course_root)))
    log(f"wrote {out_dir / 'grades.csv'}, {out_dir / 'summary.csv'} and {out_dir / 'summary.md'}")
    return out_dir / "grades.csv", out_dir / "summary.md"


def _questions(gb):
    from nbgrader.api import Grade
    stats = []
    for assignment in gb.assignments:
        for notebook in assignment.notebooks:
            for grade_cell in notebook.grade_cells:
                grades = list(gb.db.query(Grade).filter(Grade.cell_id == grade_cell.id))
                if not grades:  # a lesson nobody has submitted yet
                    continue
                scores = [g.score for g in grades if not pending(g)]  # a pending cell has no score yet
                stats.append(dict(assignment=assignment.name, notebook=notebook.name, cell=grade_cell.name,
                                  max=grade_cell.max_score, n=len(scores),
                                  full=sum(s >= grade_cell.max_score for s in scores),
                                  failed=sum(s == 0 for s in scores),
                                  mean=sum(scores) / len(scores) if scores else 0.0,
                                  pending=sorted(g.student.id for g in grades if pending(g))))
    return sorted(stats, key=lambda q: (-q["failed"], q["assignment"], q["cell"]))


def _flagged(course_root):
    """[(course.SubmissionPaths, [flag])] of every flagged submission, by lesson then student."""
    found = [(paths, outcome.read(paths)) for paths in submissions(course_root)]
    return sorted(((paths, o.flags) for paths, o in found if o is not None and o.flags),
                  key=lambda p: (p[0].lesson, p[0].student))


def _summary_md(questions, flagged):
    lines = ["# Grading summary", "", "## Questions, most failed first", "",
             "| assignment | cell | points | submissions | full marks | zero | mean | pending |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {md_text(q['assignment'])} | {md_text(q['cell'])} | {q['max']:g} | {q['n']} | {q['full']} | "
              f"{q['failed']} | {q['mean']:.2f} | {len(q['pending'])} |" for q in questions]
    pending = [(q["assignment"], q["cell"], s) for q in questions for s in q["pending"]]
    lines += ["", f"## Pending manual grading ({len(pending)})", "",
              "Test cells the grader could not run (a grader-side failure): they have no score until you give "
              "one in formgrader, and the exports leave the submission's score pending.", ""]
    lines += [f"- {md_code(student)}, {md_code(lesson)}, cell {md_code(cell)}" for lesson, cell, student in pending]
    lines += ["", f"## Flagged for manual review ({len(flagged)})", ""]
    for paths, flags in flagged:
        lesson, student = paths.lesson, paths.student
        lines.append(f"- {md_code(student)}, {md_code(lesson)} (formgrader: "
                     f"{md_code(f'/formgrader/manage_students/{student}/{lesson}')}; notebook: "
                     f"{md_code(str(paths.graded.relative_to(paths.course)))}):")
        lines += [f"  - {md_code(f)}" for f in flags]
    return "\n".join(lines) + "\n"
