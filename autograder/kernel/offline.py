"""`python -m autograder check NN`: a solution notebook run in this process, its test cells the grader's way.

A quick check that a lesson's tests follow the rules of grader-side tests (verdicts.py's docstring), with no
kernel and no sandbox: the answers run in a namespace of their own, standing in for the kernel."""
import contextlib
import io

from .. import cells
from .session import Session
from .transport import in_process_transport
from .verdicts import LessonTests, code_of


def check_lesson(notebook_path, log=print):
    """Run a solution notebook in this process, its test cells the grader's way; returns {grade_id: error or None}.

    The answers and ready-made cells run in a namespace of their own (standing in for the kernel)
    and every test cell runs through a Session, as in grading: a quick check that a lesson's
    tests follow the rules of grader-side tests (see the module docstring).
    """
    import os
    import re
    import nbformat
    os.environ.setdefault("COURSE_FAST", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    nb = nbformat.read(str(notebook_path), as_version=4)
    kernel = {"__name__": "__main__"}
    runner = LessonTests(nb).runner(Session(in_process_transport(kernel)))
    results = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        if cells.is_test(cell):
            grade_id = cells.grade_id(cell)
            _, error = runner.run(grade_id)
            results[grade_id] = error
            log(f"{grade_id}: " + ("passed" if error is None else f"FAILED {type(error).__name__}: {str(error)[:400]}"))
            continue
        source = re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", code_of(cell.source))
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(source, "<cell>", "exec"), kernel)
        except Exception as e:  # noqa: BLE001: reported, the run goes on as a notebook's would
            log(f"  (a ready-made or answer cell raised {type(e).__name__}: {str(e)[:200]})")
    return results
