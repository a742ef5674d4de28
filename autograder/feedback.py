"""`feedback` and `export`: HTML feedback without the hidden tests, the grades CSV and a summary.

nbgrader's autograde puts the hidden tests back into the autograded notebook, and its
feedback would show them (in the test cells, in tracebacks, and in anything the student's
code printed from the kernel's history). HideHiddenTests, first in the feedback
preprocessors, removes the hidden regions with nbgrader's ClearHiddenTests; shows of each
test cell only its outcome (no output when it passed, the error's name and its message cut
to MAX_MESSAGE characters when not: never what student code printed or displayed during the
tests, however encoded); blanks every line of hidden test code wherever it still appears in
an output; and drops outputs that would run in the page (JavaScript, widget views, SVG).
HTML outputs are sanitized by nbconvert (HTMLExporter.sanitize_html in nbgrader_config.py);
Markdown the student wrote or changed is shown as text (nbgrader's feedback template renders
Markdown cells without nbconvert's sanitizer).
"""
import csv
import html
import json
import re
from collections import defaultdict
from pathlib import Path

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)
MIN_SECRET_LINE = 6  # shorter lines (`)`, `else:`) reveal nothing and would blank too much
MAX_MESSAGE = 300  # characters of a failed test's message shown to the student
ACTIVE_MIME = {"application/javascript", "text/javascript", "image/svg+xml"}


class HideHiddenTests(NbGraderPreprocessor):
    """Remove hidden tests from an autograded notebook before it becomes feedback."""

    def preprocess(self, nb, resources):
        secrets = sorted({line.strip() for cell in nb.cells if cell.cell_type == "code"
                          for block in HIDDEN.findall(cell.source) for line in block.splitlines()
                          if len(line.strip()) >= MIN_SECRET_LINE}, key=len, reverse=True)
        visible = {line.strip() for cell in nb.cells for line in HIDDEN.sub("", cell.source).splitlines()}
        secrets = [s for s in secrets if s not in visible]  # also shown to students: not a secret
        from .grading import _lesson_notebook
        released = _lesson_notebook(self.config, resources, "release")
        trusted = {c.source.strip() for c in released.cells if c.cell_type == "markdown"} if released else set()
        clear = ClearHiddenTests(parent=self)
        for cell in nb.cells:
            cell.get("metadata", {}).pop("autograder", None)  # what grading removed from test cells
            if cell.cell_type == "markdown" and cell.source.strip() not in trusted:
                # nbgrader's feedback template renders Markdown cells unsanitized: student text shows as text
                cell.source = html.escape(cell.source, quote=False)
            if cell.cell_type != "code":
                continue
            had_hidden = "BEGIN HIDDEN TESTS" in cell.source
            clear._remove_hidden_test_region(cell)
            if _is_test(cell):  # its outcome only: passed (no output) or the check's own message, bounded
                cell.outputs = [_outcome(o, had_hidden) for o in cell.get("outputs", []) if o.output_type == "error"]
            cell.outputs = [o for o in map(_inert, cell.get("outputs", [])) if o is not None]
            for out in cell.outputs:
                _scrub(out, secrets)
        return nb, resources


def _is_test(cell):
    m = cell.get("metadata", {}).get("nbgrader", {})
    return bool(m.get("grade")) and not m.get("solution")


def _outcome(out, had_hidden):
    message = out.get("evalue", "")
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + " [...]"
    out.evalue = message
    out.traceback = [f"{out.ename}: {message}"] + (
        ["(the traceback is hidden: this test cell runs hidden tests)"] if had_hidden else [])
    return out


def _inert(out):
    """An output with nothing that runs in the page: no JavaScript, widget views or SVG (which can script)."""
    data = out.get("data")
    if not data:
        return out
    for mime in list(data):
        if mime in ACTIVE_MIME or mime.startswith("application/vnd.jupyter.widget"):
            del data[mime]
    if not data:
        return None
    return out


def _scrub(out, secrets):
    def clean(text):
        for secret in secrets:
            text = text.replace(secret, "[hidden test]")
        return text
    if "text" in out:
        out.text = clean(out.text)
    if "evalue" in out:
        out.evalue = clean(out.evalue)
        out.traceback = [clean(t) for t in out.traceback]
    for key, value in out.get("data", {}).items():
        if isinstance(value, str):
            out.data[key] = clean(value)


def generate_feedback(course_root, lessons=None, students=None, log=print):
    """HTML feedback in course_root/feedback/<student>/<lesson>/ for every autograded submission."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from .grading import grading_config
    config = grading_config(course_root)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    written = []
    for folder in sorted(Path(course_root, "autograded").glob("*/*")):
        student, lesson = folder.parent.name, folder.name
        if (lessons and lesson not in lessons) or (students and student not in students):
            continue
        result = api.generate_feedback(lesson, student, force=True)
        target = Path(course_root, "feedback", student, lesson)
        if result["success"]:
            written += sorted(target.glob("*.html"))
            log(f"feedback {lesson} {student} -> {target}")
        else:
            log(f"feedback {lesson} {student} FAILED: {(result['error'] or result['log']).strip()[-500:]}")
    return written


def export(course_root, out_dir, log=print):
    """grades.csv (nbgrader's CSV export) and summary.csv / summary.md (per question, flags) in out_dir."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with Gradebook(f"sqlite:///{Path(course_root).resolve() / 'gradebook.db'}") as gb:
        CsvExportPlugin(to=str(out_dir / "grades.csv")).export(gb)
        from .lms import export_lms; export_lms(gb, out_dir, log)  # canvas.csv, moodle.csv
        questions = _questions(gb)
    flagged = _flagged(course_root)
    with open(out_dir / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["assignment", "notebook", "cell", "max_points", "submissions", "full_marks", "failed", "mean"])
        for q in questions:
            w.writerow([q["assignment"], q["notebook"], q["cell"], q["max"], q["n"], q["full"], q["failed"],
                        f"{q['mean']:.2f}"])
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
            for cell in notebook.grade_cells:
                scores = [g.score for g in gb.db.query(Grade).filter(Grade.cell_id == cell.id)]
                if not scores:  # a lesson nobody has submitted yet
                    continue
                stats.append(dict(assignment=assignment.name, notebook=notebook.name, cell=cell.name,
                                  max=cell.max_score, n=len(scores), full=sum(s >= cell.max_score for s in scores),
                                  failed=sum(s == 0 for s in scores),
                                  mean=sum(scores) / len(scores) if scores else 0.0))
    return sorted(stats, key=lambda q: (-q["failed"], q["assignment"], q["cell"]))


def _flagged(course_root):
    flagged = defaultdict(list)
    for report in sorted(Path(course_root, "reports").glob("*/*.json")):
        r = json.loads(report.read_text())
        if r["flags"]:
            flagged[(r["lesson"], r["student"])] = r["flags"]
    return flagged


def _summary_md(questions, flagged):
    lines = ["# Grading summary", "", "## Questions, most failed first", "",
             "| assignment | cell | points | submissions | full marks | zero | mean |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {q['assignment']} | {q['cell']} | {q['max']:g} | {q['n']} | {q['full']} | {q['failed']} | "
              f"{q['mean']:.2f} |" for q in questions]
    lines += ["", f"## Flagged for manual review ({len(flagged)})", ""]
    for (lesson, student), flags in sorted(flagged.items()):
        lines.append(f"- **{student}**, {lesson} (formgrader: /formgrader/manage_students/{student}/{lesson}; "
                     f"notebook: autograded/{student}/{lesson}/{lesson}.ipynb):")
        lines += [f"  - {f}" for f in flags]
    return "\n".join(lines) + "\n"
