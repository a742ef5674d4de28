"""`grade`: nbgrader's autograde for a whole class, in parallel, with the kernel sandboxed.

Each (lesson, student) is graded by a worker process of its own, forked by a warm zygote
that has nbgrader imported already (zygote.py: `python -m autograder.grading JOB` without its
1.7 s of imports). The worker runs nbgrader's Autograde converter (through NbGraderAPI) on the course directory,
with these changes made through nbgrader's configuration (nbgrader_config.py holds the
preprocessor lists, so plain `nbgrader autograde` applies the same rules, without the sandbox):

- RestoreCellMetadata (restore.py) gives every cell the nbgrader metadata it was released
  with, so a tampered cell no longer fails the whole notebook; DeduplicateIds turns a
  copied-and-pasted graded cell into an ordinary cell (nbgrader's own leaves metadata that
  its schema check rejects, failing the whole submission);
- GradingExecute runs every graded test cell on the grader's side (verdicts.py): the test,
  its reference values and its comparisons stay in this process and reach the student's code
  only as calls with plain data, so nothing the student's code patches takes part in a verdict;
  the runtime integrity check (integrity.py) after every test cell flags patches for review
  without changing a score; SandboxedExecute adds the kernel launcher of sandbox.py, a
  wall-clock budget per notebook, capped output, and a dead kernel (os._exit, a crash, a
  memory limit) failing the remaining cells instead of the whole notebook;
- TestCellOutcome makes a test cell pass or fail on one fact, whether it raised an error,
  before nbgrader's SaveAutoGrades reads its outputs;
- the gradebook is a private copy (a shard): SQLite takes one writer at a time, so
  workers never share it. When a worker ends, the parent copies what nbgrader wrote
  about that submission into the course gradebook: one writer, no lost grade.

With --jobs N, each kernel gets cores/N torch threads (OMP_NUM_THREADS, unless set), so
N kernels do not fight over the cores.

A worker that fails or runs past the hard limit is killed with its process group; the
submission is still entered in the gradebook (with zero for what was not graded) and
flagged, and the other students go on. SIGINT or SIGTERM stops every worker and kernel,
keeps what finished, and names the rest; a report per graded notebook (with its sha256)
lets the next run skip what is done.
"""
import hashlib
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .course import REPO, SOLUTIONS, load_config
from .flags import flag_submission
from .restore import restore
from . import integrity, sandbox, verdicts, zygote

RUNTIME_FLAGS = ("the kernel died", "the notebook ran past")  # events that cost points the tests cannot judge
HANG = "hang:"  # events of a kernel that stopped answering (see work_retrying_a_hang)
HARD_LIMIT_GRACE_S = 60  # beyond the notebook budget: kernel start, sanitizing, saving grades


@dataclass
class Limits:
    cell_timeout: int = None      # seconds for one cell (None: nbgrader_config.py's Execute.timeout)
    notebook_timeout: int = 300   # seconds of execution for one notebook
    memory_mb: int = 4096         # address space of the kernel
    nproc: int = 512              # processes and threads of the sandbox user
    fsize_mb: int = 64            # largest file the kernel may write
    output_kb: int = 512          # output kept per cell


@dataclass
class Result:
    lesson: str
    student: str
    status: str = "graded"        # graded | failed | invalid
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    flags: list = field(default_factory=list)
    events: list = field(default_factory=list)
    error: str = ""
    submission: str = ""          # sha256 of the graded notebook: a re-run skips it while it is unchanged


def grading_config(course_root, db_url=None, limits=Limits(), sandbox_settings=None):
    """The course's nbgrader config (which also hides hidden tests in feedback) plus sandboxed execution."""
    config = load_config(course_root)
    if db_url:
        config.CourseDirectory.db_url = db_url
    if limits.cell_timeout is not None:  # else nbgrader_config.py's, the one plain nbgrader uses too
        config.Execute.timeout = limits.cell_timeout
    config.Execute.iopub_timeout = 30  # output still arriving after the reply on a busy machine
    config.SandboxedExecute.notebook_timeout = limits.notebook_timeout
    config.SandboxedExecute.max_output_bytes = limits.output_kb * 1024
    if sandbox_settings is not None:
        config.SandboxKernelManager.sandbox = sandbox_settings
    # nbgrader_config.py's preprocessors (the pass/fail rule, restored metadata), with the sandboxed kernel
    config.Autograde.autograde_preprocessors = [
        "autograder.grading.SandboxedExecute" if p == "autograder.grading.GradingExecute" else p
        for p in config.Autograde.autograde_preprocessors]
    return config


def sandbox_settings(course_root, limits):
    """What the kernel may read (an allow-list: the Python installation, course_utils) and its limits.

    must_not_see only feeds the probe's check that the sandbox hides them: nothing outside
    read_only (and the kernel's own submission and scratch space) is visible anyway.
    """
    import importlib.util
    course_utils = Path(importlib.util.find_spec("course_utils").origin).resolve().parent
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    inside = lambda p: any(p == q or p.startswith(q + os.sep) for q in prefixes)  # noqa: E731
    paths = {os.path.realpath(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    read_only = sorted(prefixes | {p for p in paths if not inside(p)} | {str(course_utils)})
    must_not_see = [Path(course_root).resolve(), SOLUTIONS, REPO / ".git", Path.home() / ".ssh"]
    font_cache = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib")
    return dict(read_only=read_only, python_path=[str(course_utils.parent)], must_not_see=[str(p) for p in must_not_see], font_cache=font_cache,
                memory_mb=limits.memory_mb,
                nproc=limits.nproc, fsize_mb=limits.fsize_mb,
                cpu_s=(limits.notebook_timeout + HARD_LIMIT_GRACE_S) * (os.cpu_count() or 1))


def _execute_class():
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from jupyter_core.utils import run_sync
    from nbformat.v4 import new_output
    from traitlets import Bool, Integer
    from nbgrader.preprocessors import Execute
    from .nbrun import SlicedWaits

    def error(ename, evalue):
        return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])

    class GradingExecute(SlicedWaits, Execute):
        """nbgrader's Execute with the test cells run on the grader's side, and the integrity check.

        A graded test cell is never sent to the kernel: verdicts.py runs it here, from the source
        notebook, against the student's objects. Before the first cell, a silent request records
        what the tests rely on; after each graded test cell the same request is compared with it.
        A change is a flag for review (`integrity: ...`), never a score: the verdicts do not depend
        on the kernel's state, so a patch earns nothing and costs nothing the honest work earned.
        """
        integrity_check = Bool(True, help="check what the tests rely on after every test cell").tag(config=True)
        check_timeout = Integer(30, help="seconds to wait for the integrity check's answer").tag(config=True)

        def preprocess(self, nb, resources=None, km=None):
            source = _lesson_notebook(self.config, resources, "source")
            if source is None:
                raise ValueError("the lesson's source notebook was not found: its tests cannot run")
            self._watch = integrity.Watch(source)
            self._tests, self._runner = verdicts.LessonTests(source), None
            self._integrity_off = not self.integrity_check
            self._reported = set()
            return super().preprocess(nb, resources, km)

        def _run_test_here(self, cell, index):
            """A test cell's verdict, decided in this process (verdicts.py): the kernel never sees the test."""
            if self._runner is None:
                transport = verdicts.kernel_transport(
                    self.kc, run_sync(self.kc.shell_channel.get_msg), deadline=lambda: self._test_deadline,
                    on_timeout=run_sync(self.km.interrupt_kernel), is_alive=run_sync(self.km.is_alive))
                self._runner = self._tests.runner(verdicts.Session(transport))
            self._test_deadline = time.monotonic() + (self.timeout or 60)
            try:
                stdout, error = self._runner.run(_grade_id(cell))
            except verdicts.GraderSideError as e:
                stdout, error = "", e
                _event(f"verdicts: the grader could not run test cell {_grade_id(cell)}: {e}")
            if isinstance(error, TimeoutError):
                _event(f"cell {index} timed out: the student's code ran past the cell's limit during its test")
            cell.outputs = verdicts.outputs_for(stdout, error)
            cell.execution_count = None
            return cell

        def _ask(self, mode):
            nonce, expression = self._watch.request(mode)
            msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"check": expression},
                                     allow_stdin=False, stop_on_error=False)
            # the baseline imports torch, numpy and course_utils (the notebook's first cells would): a cell's time
            timeout = max(self.check_timeout, self.timeout or 0) if mode == "baseline" else self.check_timeout
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    msg = run_sync(self.kc.shell_channel.get_msg)(timeout=max(0.1, deadline - time.monotonic()))
                except Exception:  # noqa: BLE001: queue.Empty, or the channel closed with the kernel
                    break
                if msg["parent_header"].get("msg_id") == msg_id:
                    return self._watch.parse(nonce, msg)
            raise ValueError(f"no answer within {timeout} s")

        def preprocess_cell(self, cell, resources, index):
            if cell.cell_type == "code" and not self._integrity_off and self._watch.baseline is None:
                try:
                    self._watch.baseline = self._ask("baseline")
                except Exception as e:  # noqa: BLE001: the grader's problem, never the student's score
                    self._integrity_off = True
                    _event(f"integrity: not checked: the grader's check could not start ({e})")
            if _is_test(cell) and _grade_id(cell) in self._tests.tests:
                cell = self._run_test_here(cell, index)
            else:
                cell, resources = super().preprocess_cell(cell, resources, index)
            if _is_test(cell) and not self._integrity_off and self._watch.baseline is not None:
                try:
                    changes = self._watch.changes(self._ask("check"))
                except Exception as e:  # noqa: BLE001: a kernel that fakes or withholds the answer
                    changes = [f"the integrity check got no genuine answer ({e})"]
                if changes:
                    for change in changes:
                        if change not in self._reported:
                            self._reported.add(change)
                            _event(f"integrity: {change} (first seen after test cell {_grade_id(cell)})")
            return cell, resources

    class SandboxedExecute(GradingExecute):
        """GradingExecute with a sandboxed kernel, a notebook budget, capped output and dead-kernel recovery."""
        notebook_timeout = Integer(300, help="seconds of execution for the whole notebook").tag(config=True)
        max_output_bytes = Integer(512 * 1024, help="output kept per cell (the rest is dropped)").tag(config=True)

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("kernel_manager_class", sandbox.SandboxKernelManager)
            super().__init__(*args, **kwargs)

        def preprocess(self, nb, resources=None, km=None):
            self._deadline = time.monotonic() + self.notebook_timeout
            self._cell_timeout = self.timeout
            self._dead = None
            self._timed_out = False
            self._output_bytes = {}
            return super().preprocess(nb, resources, km)

        def start_new_kernel(self, **kwargs):
            super().start_new_kernel(**kwargs)
            _record_kernel(self.km)

        def preprocess_cell(self, cell, resources, index):
            if cell.cell_type != "code":
                return cell, resources
            remaining = self._deadline - time.monotonic()
            if not self._dead and remaining <= 0:
                self._dead = f"the notebook ran past its {self.notebook_timeout} s budget before cell {index}"
                _event(self._dead)
            if self._dead:
                cell.outputs = [error("CellNotRun", f"not run: {self._dead}")]
                _event(f"cell {index} not run: {self._dead}")
                return cell, resources
            self.timeout = max(1, int(min(self._cell_timeout, remaining)))
            try:
                return super().preprocess_cell(cell, resources, index)
            except DeadKernelError:
                self._dead = f"the kernel died in cell {index} (os._exit, a crash, or a resource limit)"
                cell.outputs.append(error("DeadKernelError", self._dead))
                _event(self._dead)
                return cell, resources
            except CellTimeoutError as e:  # no reply, or output still streaming, after the interrupt
                cell.outputs.append(error("CellTimeoutError", str(e).splitlines()[0]))
                _event(f"cell {index} timed out: {str(e).splitlines()[0]}")
                self._note_timeout(cell, index)
                return cell, resources

        def _note_timeout(self, cell, index):
            if "iopub.execute_input" not in cell.metadata.get("execution", {}) and not self._timed_out:
                # the kernel never started the cell, right after one that ended: a lost request
                # (ipykernel issue 1554), not slow code (after a timeout, the student's code may hold it)
                _event(f"{HANG} cell {index} never started: the kernel sat idle and no reply came")
            self._timed_out = True

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            outputs = kwargs["cell"].get("outputs", [])
            if any(o.output_type == "error" and o.ename == "CellTimeoutError" for o in outputs):
                _event(f"cell {kwargs['cell_index']} timed out after {self.timeout} s")
                self._note_timeout(kwargs["cell"], kwargs["cell_index"])

        def output(self, outs, msg, display_id, cell_index):
            if msg["msg_type"] in ("stream", "display_data", "execute_result", "update_display_data"):
                size = len(json.dumps(msg["content"]))
                used = self._output_bytes.get(cell_index, 0)
                self._output_bytes[cell_index] = used + size
                if used + size > self.max_output_bytes:
                    if used <= self.max_output_bytes:
                        _event(f"cell {cell_index} output truncated at {self.max_output_bytes} bytes")
                        outs.append(new_output("stream", name="stdout",
                                               text=f"\n... output truncated at {self.max_output_bytes} bytes ...\n"))
                    return None
            return super().output(outs, msg, display_id, cell_index)

    return GradingExecute, SandboxedExecute


def _is_test(cell):
    m = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(m.get("grade")) and not m.get("solution")


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _lesson_notebook(config, resources, step):
    """The lesson's source (or release) notebook of the submission being graded, or None."""
    from nbgrader.coursedir import CourseDirectory
    try:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=config)
        folder = coursedir.source_directory if step == "source" else coursedir.release_directory
        path = Path(coursedir.format_path(folder, ".", info["assignment"]), f"{info['notebook']}.ipynb")
        return nbformat.read(str(path), as_version=4)
    except (KeyError, TypeError, OSError, ValueError):
        return None


def _event(text):
    path = os.environ.get("AUTOGRADER_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def _record_kernel(km):
    """Note the kernel's process id beside the events, so that the parent can stop it on Ctrl-C."""
    path = os.environ.get("AUTOGRADER_EVENTS")
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    if path and pid:
        with open(Path(path).with_name("kernels.txt"), "a") as f:
            f.write(f"{pid}\n")


GradingExecute, SandboxedExecute = _execute_class()


def _outcome_class():
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Integer

    class TestCellOutcome(NbGraderPreprocessor):
        """Reduce every graded test cell's outputs to its outcome: nothing when it passed, its error when not.

        nbgrader scores a test cell from its outputs: an error or any stderr text scores zero, and a
        display result (execute_result) is read as partial credit, full marks when it is not a
        number. Student code runs inside test cells, so it can print to stderr (a warning, a log
        line) and lose a correct answer its points, or display a result and win the points of a
        failed test. The course's rule is pass/fail: a test cell earns its points if and only if it
        raised no error. After this preprocessor nbgrader's own SaveAutoGrades applies exactly that
        rule, and feedback cannot show what student code printed during the hidden tests. What was
        removed is kept, bounded, in the cell's metadata (autograder.removed_outputs) for the
        instructor.
        """
        __test__ = False  # not a pytest test class, whatever its name
        max_message = Integer(1000, help="characters of an error message kept").tag(config=True)
        max_removed = Integer(2000, help="characters of removed output kept in the metadata").tag(config=True)

        def preprocess_cell(self, cell, resources, index):
            if not _is_test(cell):
                return cell, resources
            errors = [o for o in cell.outputs if o.output_type == "error"]
            removed = [o for o in cell.outputs if o.output_type != "error"]
            for o in errors:
                o.ename = _bounded(str(o.get("ename", "")), 100)
                o.evalue = _bounded(str(o.get("evalue", "")), self.max_message)
            cell.outputs = errors[:1]
            if removed:
                text = "".join(o.get("text", "") if o.output_type == "stream" else
                               f"[{o.output_type}: {', '.join(o.get('data', {}))}] "
                               f"{o.get('data', {}).get('text/plain', '')}\n" for o in removed)
                cell.metadata.setdefault("autograder", {})["removed_outputs"] = _bounded(text, self.max_removed)
            return cell, resources

    return TestCellOutcome


def _bounded(text, limit):
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


TestCellOutcome = _outcome_class()


def _restore_class():
    from nbgrader.preprocessors import NbGraderPreprocessor

    class RestoreCellMetadata(NbGraderPreprocessor):
        """restore.py before nbgrader's OverwriteCells: every cell gets its released nbgrader metadata back."""

        def preprocess(self, nb, resources):
            released = _lesson_notebook(self.config, resources, "release") or \
                _lesson_notebook(self.config, resources, "source")
            for change in restore(nb, released) if released is not None else []:
                self.log.warning("tampered: %s", change)
            return nb, resources

    return RestoreCellMetadata


RestoreCellMetadata = _restore_class()


def _strip_class():
    from nbgrader.preprocessors import NbGraderPreprocessor

    class StripHiddenTests(NbGraderPreprocessor):
        """Remove the hidden tests from the notebook that is written beside the kernel (after OverwriteCells).

        nbgrader's autograde writes the sanitized notebook, test cells restored from the source,
        into the folder the kernel runs in. The tests now run on the grader's side from the source
        notebook (verdicts.py), so the notebook on disk keeps only what the student was given: no file
        the kernel can open holds a hidden test. Only graded test cells are touched (their source is
        the instructor's); a student's own cell that merely contains the delimiters stays as it is.
        """

        def preprocess_cell(self, cell, resources, index):
            if _is_test(cell):
                kept, hidden = [], False
                for line in cell.source.split("\n"):
                    if "BEGIN HIDDEN TESTS" in line:
                        hidden = True
                    elif "END HIDDEN TESTS" in line:
                        hidden = False
                    elif not hidden:
                        kept.append(line)
                cell.source = "\n".join(kept).rstrip("\n")
            return cell, resources

    return StripHiddenTests


StripHiddenTests = _strip_class()


def _deduplicate_class():
    from nbgrader.preprocessors import DeduplicateIds as NbgraderDeduplicateIds

    class DeduplicateIds(NbgraderDeduplicateIds):
        """nbgrader's DeduplicateIds, fixed: the copies of a cell lose their nbgrader metadata entirely.

        A cell copied and pasted in Jupyter keeps its metadata, grade_id included. nbgrader keeps
        the first and sets the copy's metadata to {}, which its own schema check then rejects
        ("Outdated schema version: 0") and the whole submission fails. Removing the key instead
        makes the copy an ordinary student cell: it still runs, it earns nothing.
        """

        def preprocess_cell(self, cell, resources, cell_index):
            cell, resources = super().preprocess_cell(cell, resources, cell_index)
            if cell.metadata.get("nbgrader", None) == {}:
                del cell.metadata["nbgrader"]
            return cell, resources

    return DeduplicateIds


DeduplicateIds = _deduplicate_class()


# ---------------------------------------------------------------- the worker process

def work(job):
    """Autograde one submission into the shard gradebook named in `job` (runs in the worker)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    limits = Limits(**job["limits"])
    config = grading_config(job["course"], job["db_url"], limits, job["sandbox"])
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.autograde(job["lesson"], job["student"], force=True, create=True)
    return {"success": bool(result["success"]), "error": result.get("error") or "", "log": result.get("log") or ""}


# ---------------------------------------------------------------- the parent

def submissions(course_root, lessons=None, students=None):
    """[(lesson, student)] for every submitted/<student>/<lesson>/ in the course."""
    found = []
    for folder in sorted(Path(course_root, "submitted").glob("*/*")):
        student, lesson = folder.parent.name, folder.name
        if folder.is_dir() and (not lessons or lesson in lessons) and (not students or student in students):
            found.append((lesson, student))
    return found


def _gradebook(course_root):
    from nbgrader.api import Gradebook
    return Gradebook(f"sqlite:///{Path(course_root).resolve() / 'gradebook.db'}")


def merge(shard_url, course_root, lesson, student):
    """Copy what nbgrader wrote about one submission from a shard gradebook into the course gradebook."""
    from nbgrader.api import Gradebook
    with warnings.catch_warnings():  # nbgrader's own SQLAlchemy autoflush notices
        warnings.simplefilter("ignore")
        return _merge(Gradebook, shard_url, course_root, lesson, student)


def _merge(Gradebook, shard_url, course_root, lesson, student):
    with Gradebook(shard_url) as shard, _gradebook(course_root) as main:
        got = shard.find_submission(lesson, student)
        main.update_or_create_student(student)
        sub = main.update_or_create_submission(lesson, student, timestamp=got.timestamp)
        for nb in got.notebooks:
            target = main.find_submission_notebook(nb.name, lesson, student)
            target.late_submission_penalty = nb.late_submission_penalty
            for grade in nb.grades:
                g = main.find_grade(grade.name, nb.name, lesson, student)
                g.auto_score, g.needs_manual_grade = grade.auto_score, grade.needs_manual_grade
            for comment in nb.comments:
                c = main.find_comment(comment.name, nb.name, lesson, student)
                c.auto_comment = comment.auto_comment
        main.db.commit()
        return sub.score, sub.max_score


def record_failure(course_root, lesson, student):
    """Enter a submission that could not be graded: every grade zero, nothing left pending."""
    with warnings.catch_warnings(), _gradebook(course_root) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(lesson, student)
        for nb in sub.notebooks:
            for grade in nb.grades:
                if grade.auto_score is None:
                    grade.auto_score = 0
        gb.db.commit()
        return sub.score, sub.max_score


def save_flags(course_root, result):
    """Mark the submission flagged in the gradebook (nbgrader's own flag) and write the report file."""
    with _gradebook(course_root) as gb:
        for nb in gb.find_submission(result.lesson, result.student).notebooks:
            nb.flagged = bool(result.flags)
        gb.db.commit()
    report = Path(course_root, "reports", result.lesson, f"{result.student}.json")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(result.__dict__, indent=1))


def check_submission(course_root, lesson, student):
    """Static flags for one submission; raises ValueError when the notebook cannot be read."""
    folder = Path(course_root, "submitted", student, lesson)
    path = folder / f"{lesson}.ipynb"
    if not path.exists():
        raise ValueError(f"no {path.name} in {folder} (found: {', '.join(p.name for p in folder.iterdir()) or 'nothing'})")
    from . import size  # before nbformat reads it: refuses (ValueError "size: ...") or trims an absurd notebook
    size_flags = size.check(course_root, lesson, student)
    try:
        submitted = nbformat.read(str(path), as_version=4)
        nbformat.validate(submitted)
    except Exception as e:  # noqa: BLE001: any unreadable file is reported, never fatal
        raise ValueError(f"{path.name} is not a valid notebook: {type(e).__name__}: {str(e)[:200]}") from None
    source = nbformat.read(str(Path(course_root, "source", lesson, f"{lesson}.ipynb")), as_version=4)
    release_path = Path(course_root, "release", lesson, f"{lesson}.ipynb")
    release = nbformat.read(str(release_path), as_version=4) if release_path.exists() else None
    flags = size_flags + flag_submission(submitted, source, release)
    restored = nbformat.from_dict(json.loads(json.dumps(submitted)))
    tampered = restore(restored, release or source)  # what RestoreCellMetadata will do in the worker
    present = {_grade_id(c) for c in restored.cells}
    flags = [f for f in flags if not any(f"test cell {gid} was deleted" in f for gid in present if gid)]
    return flags + [f"tamper: {change}" for change in tampered]


class _Running:
    def __init__(self, course_root, lesson, student, limits, settings, threads):
        self.result = Result(lesson, student)
        self.work = Path(course_root, ".grading", lesson, student)
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        shutil.copyfile(Path(course_root, "gradebook.db"), self.work / "gradebook.db")
        self.db_url = f"sqlite:///{self.work.resolve() / 'gradebook.db'}"
        job = dict(course=str(Path(course_root).resolve()), lesson=lesson, student=student, db_url=self.db_url,
                   limits=limits.__dict__, sandbox=settings)
        (self.work / "job.json").write_text(json.dumps(job))
        env = {**os.environ, "AUTOGRADER_EVENTS": str(self.work / "events.txt"),
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # N kernels share the cores, unless told otherwise
            env.setdefault(name, str(threads))
        self.start = time.monotonic()
        self.deadline = self.start + limits.notebook_timeout + HARD_LIMIT_GRACE_S
        self.proc = zygote.start(self.work / "job.json", self.work / "worker.log", env)

    def kill(self):
        """Stop the worker and its kernels (each in its own process group): nothing of this job runs on."""
        kernels = self.work / "kernels.txt"
        groups = [self.proc.pid] + ([int(p) for p in kernels.read_text().split()] if kernels.exists() else [])
        for pgid in [g for g in groups if g > 0]:  # never 0: killpg(0) is our own group
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()

    def abandon(self, course_root):
        """Forget an interrupted job: no half-written autograded copy or report is left to be mistaken for a grade."""
        self.kill()
        r = self.result
        for path in (Path(course_root, "autograded", r.student, r.lesson), self.work):
            shutil.rmtree(path, ignore_errors=True)
        Path(course_root, "reports", r.lesson, f"{r.student}.json").unlink(missing_ok=True)

    def finish(self, course_root, timed_out):
        r = self.result
        r.seconds = round(time.monotonic() - self.start, 1)
        events = self.work / "events.txt"
        r.events = events.read_text().splitlines() if events.exists() else []
        reply = self.work / "result.json"
        outcome = json.loads(reply.read_text()) if reply.exists() else None
        if timed_out:
            r.status, r.error = "failed", f"grading ran past the hard limit ({int(self.deadline - self.start)} s)"
        elif outcome is None:
            r.status, r.error = "failed", f"the grading worker died (exit {self.proc.returncode})"
        elif not outcome["success"]:
            r.status, r.error = "failed", (outcome["log"][-3000:] + "\n" + outcome["error"][-1000:])
        if r.status == "graded":
            r.score, r.max_score = merge(self.db_url, course_root, r.lesson, r.student)
        else:
            r.score, r.max_score = record_failure(course_root, r.lesson, r.student)
            r.flags.append(f"grading: {r.error.strip().splitlines()[-1] if r.error.strip() else r.status}")
        r.flags += [f"runtime: {e} (later cells not run)" for e in r.events if e.startswith(RUNTIME_FLAGS)]
        r.flags += [e for e in r.events if e.startswith("integrity:")]
        if r.status == "graded":
            shutil.rmtree(self.work, ignore_errors=True)
        return r


class GradingInterrupted(Exception):
    """grade() was stopped by SIGINT or SIGTERM; what finished is merged, `not_graded` lists the rest."""

    def __init__(self, signal_name, results, not_graded):
        self.signal_name, self.results, self.not_graded = signal_name, results, not_graded
        super().__init__(f"{signal_name}: {len(results)} submission(s) graded, {len(not_graded)} not graded: "
                         + ", ".join(f"{lesson} {student}" for lesson, student in not_graded))


def submission_digest(course_root, lesson, student):
    """sha256 of the submitted notebook (empty when absent): a report for the same digest means already graded."""
    path = Path(course_root, "submitted", student, lesson, f"{lesson}.ipynb")
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def already_graded(course_root, lesson, student):
    """True when the report says this very notebook was graded (or found invalid); a failed grading is retried."""
    report = Path(course_root, "reports", lesson, f"{student}.json")
    try:
        r = json.loads(report.read_text())
    except (OSError, ValueError):
        return False
    return r.get("status") != "failed" and r.get("submission") == submission_digest(course_root, lesson, student)


def grade(course_root, lessons=None, students=None, jobs=1, limits=Limits(), log=print, force=False,
          probe=sandbox.probe):
    """Autograde every submission in course_root/submitted (or those named); return [Result].

    A submission already graded (its report names the same notebook digest) is skipped unless
    `force`. SIGINT or SIGTERM stops the workers and their kernels, keeps every grade that
    finished, and raises GradingInterrupted naming what was not graded: run again to resume.
    """
    course_root = Path(course_root).resolve()
    if not Path(course_root, "gradebook.db").exists():
        raise FileNotFoundError(f"no gradebook in {course_root}: run `python -m autograder release` first")
    todo = submissions(course_root, lessons, students)
    done = [] if force else [(lesson, student) for lesson, student in todo if already_graded(course_root, lesson, student)]
    todo = [t for t in todo if t not in done]
    if done:
        log(f"skipping {len(done)} submission(s) already graded (--force regrades them)")
    if not todo:
        log(f"nothing to grade in {course_root / 'submitted'}")
        return []
    zygote.warm(min(max(1, jobs), len(todo)))  # their imports run while the probe does
    settings, warnings = probe(sandbox_settings(course_root, limits))  # a Dask worker passes a cached probe
    for w in warnings:
        log(f"WARNING: {w}")
    log(f"sandbox: {sandbox.attempt_name(settings)}; grading {len(todo)} submission(s) with {jobs} job(s)")
    threads = max(1, len(os.sched_getaffinity(0)) // max(1, jobs))  # torch threads per kernel
    results, running, queue, stop = [], [], list(todo), []

    def on_signal(signum, frame):
        if not stop:
            log(f"{signal.Signals(signum).name}: stopping the workers and their kernels ...")
        stop.append(signal.Signals(signum).name)

    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while (queue or running) and not stop:
            while queue and len(running) < max(1, jobs) and not stop:
                lesson, student = queue.pop(0)
                try:
                    flags = check_submission(course_root, lesson, student)
                except ValueError as e:
                    r = Result(lesson, student, status="invalid", error=str(e), flags=[f"invalid: {e}"])
                    r.score, r.max_score = record_failure(course_root, lesson, student)
                    results.append(_done(course_root, r, log))
                    continue
                job = _Running(course_root, lesson, student, limits, settings, threads)
                job.result.flags = flags
                running.append(job)
            zygote.wait_any([job.proc for job in running], timeout=0.2)  # wakes when a worker ends
            for job in list(running):
                timed_out = time.monotonic() > job.deadline
                if timed_out:
                    job.kill()
                if job.proc.poll() is not None:
                    running.remove(job)
                    results.append(_done(course_root, job.finish(course_root, timed_out), log))
        if stop:
            not_graded = []
            for job in running:
                if job.proc.poll() is not None and (job.work / "result.json").exists():  # finished meanwhile
                    results.append(_done(course_root, job.finish(course_root, False), log))
                else:
                    job.abandon(course_root)
                    not_graded.append((job.result.lesson, job.result.student))
            not_graded += queue
            interrupted = GradingInterrupted(stop[0], results, not_graded)
            log(f"{interrupted}\nrun the same command again to grade the rest (finished grades are kept)")
            raise interrupted
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return results


def _done(course_root, result, log):
    result.submission = submission_digest(course_root, result.lesson, result.student)
    save_flags(course_root, result)
    note = f" [{len(result.flags)} flag(s)]" if result.flags else ""
    log(f"{result.lesson} {result.student}: {result.status} {result.score:g}/{result.max_score:g} "
        f"in {result.seconds:g} s{note}" + (f": {result.error.strip().splitlines()[-1]}" if result.error.strip() else ""))
    return result


def work_retrying_a_hang(job):
    """work(job); a kernel hang (a cell that never started) is graded again once in a fresh kernel,
    and a second one fails the job as the grader's fault: never a zero the student earned."""
    outcome = work(job)
    events = Path(os.environ.get("AUTOGRADER_EVENTS", os.devnull))
    hung = [e for e in (events.read_text().splitlines() if events.is_file() else []) if e.startswith(HANG)]
    if not hung:
        return outcome
    events.replace(events.with_name("events-hung.txt"))  # the first run's events, kept beside the report
    _event(f"{HANG} graded again in a fresh kernel after the first run's {hung[0][len(HANG):].strip()}")
    outcome = work(job)
    again = [e for e in events.read_text().splitlines() if e.startswith(HANG)][1:]
    if again:
        return {"success": False, "log": outcome["log"], "error": f"the grader's fault, not the student's: "
                f"the kernel hung twice ({again[0][len(HANG):].strip()}); run grade again"}
    return outcome


def main(job_file):
    """The worker: grade the job in `job_file`, write result.json beside it."""
    outcome = work_retrying_a_hang(json.loads(job_file.read_text()))
    (job_file.parent / "result.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
