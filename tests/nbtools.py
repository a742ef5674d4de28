"""Notebook helpers shared by the tests: load, execute, fill in solutions, grade with nbgrader."""
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import nbformat
from nbclient.exceptions import CellTimeoutError

REPO = Path(__file__).resolve().parent.parent
from autograder.nbrun import NotebookClient  # noqa: E402: nbclient's, without the missed-reply stalls
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
LESSONS = sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.ipynb"))
# errors a student copy may raise: unfinished exercises and the tests that catch them
EXPECTED_STUDENT_ERRORS = {"NotImplementedError", "AssertionError"}


def load(path):
    return nbformat.read(str(path), as_version=4)


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def is_solution(cell):
    return cell.metadata.get("nbgrader", {}).get("solution", False) and cell.cell_type == "code"


def is_test(cell):
    return cell.metadata.get("nbgrader", {}).get("grade", False) and cell.cell_type == "code"


# Notebook runs that hung: a cell the kernel never started (it sat idle, the reply never came;
# ipykernel 7's lost shell request, ipykernel issue 1554). Each is run again once in a fresh kernel
# and is a warning in pytest's summary, which tests/conftest.py counts when the session ends (from every
# xdist worker's warnings). With ipykernel<7 (pyproject's pin) none is expected. A cell that timed out
# while running is slow code, not a hang: it fails the test at once, as does a kernel that died.
HANGS = []
HUNG = "notebook run hung"


def _never_started(nb):
    """The cell that was running when the client gave up, if the kernel never started it."""
    started = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and "execution" in c.metadata]
    if started and "iopub.execute_input" not in started[-1][1].metadata.execution:
        return started[-1][0]
    return None


def execute(nb, fast=True, timeout=180, cwd=None, extra_env=None):
    """Run every cell (errors recorded, not raised) and return the executed notebook (a new object).

    A run that hangs (see HANGS) is run again once in a fresh kernel, and counted.
    """
    # the kernel's own environment, never this process's: runs made at once in threads (test_device.py) must not
    # see each other's settings (one run restoring os.environ while another's kernel starts lost COURSE_DEVICE)
    env = {**os.environ, "COURSE_FAST": "1" if fast else "0",
           "MPLBACKEND": "module://matplotlib_inline.backend_inline", **(extra_env or {})}
    for attempt in (1, 2):
        run = nbformat.from_dict(nb)
        try:
            NotebookClient(run, timeout=timeout, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(cwd or REPO)}}).execute(env=env)
            break
        except CellTimeoutError:
            cell = _never_started(run)
            if cell is None:
                raise
            HANGS.append(f"cell {cell} never started")
            warnings.warn(f"{HUNG} (#{len(HANGS)} in this process): cell {cell} never started, "
                          f"{'running it again in a fresh kernel' if attempt == 1 else 'again'}")
            if attempt == 2:
                raise
    return run


def errors(nb):
    """[(cell index, ename, evalue)] for every error output."""
    return [(i, o.ename, o.evalue) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"]


def stderr_text(cell):
    return "".join(o.text for o in cell.get("outputs", []) if o.output_type == "stream" and o.name == "stderr")


def fill_solutions(student_nb, solution_nb, grade_ids=None):
    """A copy of the student notebook with the solution code pasted into its answer cells.

    grade_ids: which answer cells to fill (default: all), as a student would.
    """
    answers = {grade_id(c): c.source for c in solution_nb.cells if is_solution(c)}
    filled = nbformat.reads(nbformat.writes(student_nb), as_version=4)
    for cell in filled.cells:
        gid = grade_id(cell)
        if is_solution(cell) and (grade_ids is None or gid in grade_ids):
            cell.source = re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", answers[gid])
    return filled


def submit(course, lesson, student, nb):
    """Hand in notebook `nb` as `student`'s copy of `lesson`: course/submitted/<student>/<lesson>/<lesson>.ipynb."""
    folder = Path(course) / "submitted" / student / lesson
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{lesson}.ipynb"))


def solution_ids(nb):
    return [grade_id(c) for c in nb.cells if is_solution(c)]


def json_variable_cell(name):
    """A code cell that prints a notebook variable as JSON on one tagged line (for inspection)."""
    return nbformat.v4.new_code_cell(
        f"import json as _json\nprint('@@{name}@@' + _json.dumps({name}, default=float))")


def read_json_variable(nb, name):
    for o in nb.cells[-1].get("outputs", []):
        if o.output_type == "stream" and f"@@{name}@@" in o.text:
            return json.loads(o.text.split(f"@@{name}@@", 1)[1])
    raise AssertionError(f"notebook did not define {name}: {nb.cells[-1].get('outputs')}")


def copy_course_sources(course_root, lessons):
    for lesson in lessons:
        (course_root / "source" / lesson).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOLUTIONS / f"{lesson}.ipynb", course_root / "source" / lesson / f"{lesson}.ipynb")


# first lines of the ready-made code cells that a lesson's answers and tests need besides
# its import cell
GIVEN_CELLS = {"01_seq2seq_bottleneck": ("task = cu.ReversalTask",), "05_multi_head_attention": ("def attend(",),
              "07_transformer": ("class MultiHeadAttention(",), "08_fast_attention": ("class CausalSelfAttention",)}


class LessonCode:
    """A solution notebook's code, split so that a test can run one graded test cell
    against the solution with one answer swapped for a mistaken (or another correct) one."""

    def __init__(self, lesson):
        given = GIVEN_CELLS.get(lesson, ())
        nb = load(SOLUTIONS / f"{lesson}.ipynb")
        code = [c for c in nb.cells if c.cell_type == "code" and c.get("id") != "colab-setup"]
        # the import cell, the given cells above, and every cell tagged grader-setup, in notebook order
        setup = [c.source for i, c in enumerate(code) if i == 0 or (given and c.source.startswith(tuple(given)))
                 or "grader-setup" in c.metadata.get("tags", [])]
        self.setup = "\n".join(line for line in "\n".join(setup).splitlines() if not line.lstrip().startswith("%"))
        self.lesson, self._setup_namespace, self._grader_tests = lesson, None, None
        self.answers = {grade_id(c): re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", c.source)
                        for c in code if is_solution(c)}
        self.tests = {grade_id(c): c.source for c in code if is_test(c)}

    def _answered(self, replacement):
        """A fresh namespace: a copy of the set-up's (run once per LessonCode), every answer, then
        `replacement` (redefining one answer)."""
        import textwrap
        if self._setup_namespace is None:
            self._setup_namespace = {"__name__": "__lesson__"}
            exec(self.setup, self._setup_namespace)
        namespace = dict(self._setup_namespace)
        for source in self.answers.values():
            exec(source, namespace)
        if replacement:
            exec(textwrap.dedent(replacement), namespace)
        return namespace

    def run_test_cell(self, test_id, replacement=None):
        """Run the set-up, every answer, then `replacement` (redefining one answer), then test cell `test_id`."""
        import contextlib
        import io
        from unittest import mock
        namespace = self._answered(replacement)
        # as in a notebook, where IPython's user namespace is the one cu.stand_in rebinds names in
        with contextlib.redirect_stdout(io.StringIO()), \
                mock.patch("course_utils.charged_once.notebook_namespace", lambda: namespace):
            try:
                exec(self.tests[test_id], namespace)
            finally:
                from course_utils.charged_once import end_cell
                end_cell()  # (IPython's post_run_cell would)

    def run_all_test_cells(self, replacement=None):
        """{test_id: None if the cell passed, else the exception it raised}: every graded test cell,
        in notebook order, run the grader's way (autograder.kernel.verdicts: the test cell in a namespace of
        its own built from the grader-setup cells, the answers reached through remote handles) against
        one namespace, standing in for the kernel, that holds every answer with `replacement` in place.
        So a test cell that rebinds a student's name or writes into a student's object changes
        nothing the answers see, as in grading."""
        import contextlib
        import io
        from autograder.kernel import verdicts
        from autograder.kernel import session as kernel_session
        from autograder.kernel import transport as transports
        if self._grader_tests is None:
            self._grader_tests = verdicts.LessonTests(load(SOLUTIONS / f"{self.lesson}.ipynb"))
        with contextlib.redirect_stdout(io.StringIO()):
            kernel = self._answered(replacement)
        runner = self._grader_tests.runner(kernel_session.Session(transports.in_process_transport(kernel)))
        with contextlib.redirect_stdout(io.StringIO()):
            return {test_id: runner.run(test_id)[1] for test_id in self.tests}
