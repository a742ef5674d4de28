"""What a student may see of a failed test: the error's name, its message cut, no hidden test's line in it.

One rule for every page that shows a test's failure: the student's feedback (preprocessors/hidehiddentests.py)
and the class report (class_report.py), which must show a message as the student saw it. A leaf (the standard
library only), so that the report reads it without standing above the preprocessors.
"""
import builtins

MAX_MESSAGE = 600  # characters of a failed test's message shown to the student, "..." included (a diagnosis leads it)
# error names a failed test may show: Python's own exceptions and the course's (others become "Error": a class
# name is chosen by whoever raises it, and student code can raise a class named after a hidden test)
COURSE_ERRORS = {"ForbiddenCall", "CellTimeoutError", "DeadKernelError", "CellExecutionError"}
PYTHON_ERRORS = {name for name, value in vars(builtins).items()
                 if isinstance(value, type) and issubclass(value, BaseException)}
HIDDEN = "[hidden test]"  # what a hidden test's line becomes wherever it would be shown


def cut(text, limit):
    """`text` in at most `limit` characters, "..." included when it was cut."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def failure(outputs):
    """(error name, message) of a failed test cell's outputs as feedback shows them (a Python or course error's
    name, else "Error"; the message cut to MAX_MESSAGE), or None if it passed."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return None
    error = errors[0]
    name = str(error.get("ename", ""))
    name = name if name in PYTHON_ERRORS or name in COURSE_ERRORS else "Error"
    return name, cut(str(error.get("evalue", "")), MAX_MESSAGE)


def without_secrets(text, secrets):
    """`text` with every one of `secrets` (hidden tests' lines, longest first: cells.secret_lines) replaced."""
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return text
