# nbgrader configuration for the course. `python -m autograder` loads this file
# and sets CourseDirectory.root itself. nbgrader's own command line loads it
# with JupyterApp.config_file (nbgrader 0.9 ignores `--config`), from the
# repository root, for example:
#   nbgrader autograde 01_seq2seq_bottleneck --JupyterApp.config_file=autograder/nbgrader_config.py --CourseDirectory.root=course
# (plain nbgrader runs the kernel without the sandbox of `python -m autograder grade`).
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
# leaves room for a slow machine and still stops an endless loop.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# nbgrader gives a test cell zero points if it writes anything to stderr. A
# harmless warning (a deprecation inside torch, say) must not cost a correct
# answer its points, so the grading kernel prints warnings to stdout instead.
# Real errors still fail the cell: they are error outputs, not stderr text.
_WARNINGS_TO_STDOUT = (
    "import sys as _s, warnings as _w; "
    "_w.showwarning = lambda m, c, f, l, file=None, line=None: "
    "_s.stdout.write(_w.formatwarning(m, c, f, l, line))"
)
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    f"--InteractiveShellApp.exec_lines={_WARNINGS_TO_STDOUT}",
]

# Feedback never shows the hidden tests, whether it is made by `python -m
# autograder feedback` or by plain `nbgrader generate_feedback` with this file:
# nbgrader's autograde puts them back into the graded notebook, and its own
# feedback would print them. HideHiddenTests (autograder/feedback.py) removes
# them, their tracebacks and any copy of their lines in outputs.
import sys as _sys  # noqa: E402
from pathlib import Path as _Path  # noqa: E402
_repo = str(_Path(__file__).resolve().parent.parent)  # noqa: F821  (set by traitlets)
if _repo not in _sys.path:
    _sys.path.insert(0, _repo)
c.GenerateFeedback.preprocessors = [
    "autograder.feedback.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
