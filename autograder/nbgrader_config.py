# nbgrader configuration for the course. `python -m autograder` loads this file
# and sets CourseDirectory.root itself. nbgrader's own command line loads it
# with JupyterApp.config_file (nbgrader 0.9 ignores `--config`), from the
# repository root, for example:
#   nbgrader autograde 01_seq2seq_bottleneck --JupyterApp.config_file=autograder/nbgrader_config.py --CourseDirectory.root=course
# (plain nbgrader runs the kernel without the sandbox of `python -m autograder grade`).
import sys as _sys
from pathlib import Path as _Path
_repo = str(_Path(__file__).resolve().parent.parent)  # noqa: F821  (set by traitlets)
if _repo not in _sys.path:
    _sys.path.insert(0, _repo)
from autograder.sandbox.limits import Limits as _Limits  # noqa: E402  (every limit's one home)

c = get_config()  # noqa: F821  (provided by traitlets when the file is loaded)

c.CourseDirectory.course_id = "attention-course"

# What replaces a solution in the student copy. The message tells a student
# who runs an unfinished exercise what to do.
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("Exercise not done yet: replace this line with your code.")'
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Grading runs in fast mode (nbgrader sets NBGRADER_EXECUTION, which
# course_utils reads): a whole lesson takes about 15 s, so 120 s for one cell
# leaves room for a slow machine and still stops an endless loop. The numbers
# live in autograder/sandbox/limits.py (`python -m autograder grade` reads them
# there too, and its options change them for one grading).
c.Execute.timeout = _Limits().cell_timeout
c.Execute.iopub_timeout = _Limits().iopub_timeout
c.Execute.interrupt_on_timeout = True

c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:"]

# Grading rules (autograder/preprocessors/), for `python -m autograder grade` and for
# plain `nbgrader autograde` with this file alike:
# - RestoreCellMetadata gives every cell the nbgrader metadata it was released
#   with (autograder/restore.py): a renamed grade_id or an answer cell marked as
#   graded no longer fails the whole notebook;
# - GradingExecute runs the runtime integrity check (autograder/kernel/integrity.py)
#   after every test cell; python -m autograder swaps in SandboxedExecute;
# - TestCellOutcome makes the rule pass/fail: a test cell earns its points if and
#   only if it raised no error. Whatever student code printed, warned, logged
#   (stderr, fd 2) or displayed while a test ran neither costs nor earns points,
#   and does not reach the feedback. (No warnings hook in the kernel is needed,
#   so no global name a cell could shadow.)
# - SaveGrades is nbgrader's SaveAutoGrades, except that a test cell the grader
#   itself could not run (a GraderSideError) is left for manual grading, never 0.
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput", "autograder.preprocessors.RestoreCellMetadata",
    "autograder.preprocessors.DeduplicateIds", "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells", "autograder.preprocessors.StripHiddenTests",
    "nbgrader.preprocessors.CheckCellMetadata"]
c.Autograde.autograde_preprocessors = [
    "autograder.preprocessors.GradingExecute", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "autograder.preprocessors.TestCellOutcome",
    "nbgrader.preprocessors.LimitOutput", "autograder.preprocessors.SaveGrades",
    "nbgrader.preprocessors.AssignLatePenalties", "nbgrader.preprocessors.CheckCellMetadata"]

# Feedback shows no hidden test and runs nothing in the reader's browser, whether
# it is made by `python -m autograder feedback` or by plain `nbgrader
# generate_feedback` with this file (autograder/feedback.py):
# - HideHiddenTests shows, for an ordinary code cell, the outputs the student
#   submitted (never what the grader's run printed: code after a test cell can
#   read the executed hidden tests), and for a test cell only passed/failed with
#   the error's name and at most 300 characters of its message;
# - SafeFeedbackExporter sanitises the final HTML with an allow-list (tags,
#   attributes, http/https/mailto links, base64 PNG/JPEG/GIF images) and gives
#   the page a Content-Security-Policy that allows no script.
c.GenerateFeedback.preprocessors = [
    "autograder.preprocessors.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
c.GenerateFeedback.exporter_class = "autograder.feedback.SafeFeedbackExporter"
c.HTMLExporter.sanitize_html = True  # nbconvert's own pass on outputs too; the page's sanitiser is the guarantee

# Exports a spreadsheet opens safely: plain `nbgrader export` writes grades.csv
# with every field quoted and formula starts (= + - @ tab CR LF) neutralised
# (autograder/export.py), as `python -m autograder export` does.
c.ExportApp.plugin_class = "autograder.export.CourseCsvExportPlugin"
