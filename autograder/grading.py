"""`grade`: nbgrader's autograde for a whole class, in parallel, with the kernel sandboxed.

Each (lesson, student) is graded by a worker process (`python -m autograder.grading JOB`)
that runs nbgrader's Autograde converter (through NbGraderAPI) on the course directory,
with three changes made through nbgrader's configuration:

- the Execute preprocessor is SandboxedExecute: the kernel starts through the launcher
  in sandbox.py, a notebook has a wall-clock budget, a cell's output is capped, and a
  dead kernel (os._exit, a crash, a memory limit) fails the remaining cells instead of
  the whole notebook;
- DeduplicateIds turns a copied-and-pasted graded cell into an ordinary cell (nbgrader's
  own leaves metadata that its schema check rejects, failing the whole submission);
- the gradebook is a private copy (a shard): SQLite takes one writer at a time, so
  workers never share it. When a worker ends, the parent copies what nbgrader wrote
  about that submission into the course gradebook: one writer, no lost grade.

With --jobs N, each kernel gets cores/N torch threads (OMP_NUM_THREADS, unless set), so
N kernels do not fight over the cores.

A worker that fails or runs past the hard limit is killed with its process group; the
submission is still entered in the gradebook (with zero for what was not graded) and
flagged, and the other students go on.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .course import REPO, SOLUTIONS, load_config
from .flags import flag_submission
from . import sandbox

RUNTIME_FLAGS = ("the kernel died", "the notebook ran past")  # events that cost points the tests cannot judge
HARD_LIMIT_GRACE_S = 60  # beyond the notebook budget: kernel start, sanitizing, saving grades


@dataclass
class Limits:
    cell_timeout: int = 60        # seconds for one cell
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


def grading_config(course_root, db_url=None, limits=Limits(), sandbox_settings=None):
    """The course's nbgrader config (which also hides hidden tests in feedback) plus sandboxed execution."""
    config = load_config(course_root)
    if db_url:
        config.CourseDirectory.db_url = db_url
    config.Execute.timeout = limits.cell_timeout
    config.Execute.iopub_timeout = 30  # output still arriving after the reply on a busy machine
    config.SandboxedExecute.notebook_timeout = limits.notebook_timeout
    config.SandboxedExecute.max_output_bytes = limits.output_kb * 1024
    if sandbox_settings is not None:
        config.SandboxKernelManager.sandbox = sandbox_settings
    preprocessors = ["autograder.grading.SandboxedExecute", "nbgrader.preprocessors.IgnorePattern",
                     "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
                     "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
                     "nbgrader.preprocessors.CheckCellMetadata"]
    config.Autograde.autograde_preprocessors = preprocessors
    config.Autograde.sanitize_preprocessors = [
        "nbgrader.preprocessors.ClearOutput", "autograder.grading.DeduplicateIds",
        "nbgrader.preprocessors.OverwriteKernelspec", "nbgrader.preprocessors.OverwriteCells",
        "nbgrader.preprocessors.CheckCellMetadata"]
    return config


def sandbox_settings(course_root, limits):
    """What the kernel must not see, and what must stay reachable (the Python installation)."""
    hide = [Path(course_root).resolve(), SOLUTIONS, REPO / ".git", Path.home()]
    expose = {sys.prefix, sys.base_prefix, str(REPO)} | {p for p in sys.path if "site-packages" in p}
    return dict(hide=[str(p) for p in hide], expose=sorted(expose), memory_mb=limits.memory_mb,
                nproc=limits.nproc, fsize_mb=limits.fsize_mb,
                cpu_s=(limits.notebook_timeout + HARD_LIMIT_GRACE_S) * (os.cpu_count() or 1))


def _execute_class():
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbformat.v4 import new_output
    from traitlets import Integer
    from nbgrader.preprocessors import Execute

    def error(ename, evalue):
        return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])

    class SandboxedExecute(Execute):
        """nbgrader's Execute with a sandboxed kernel, a notebook budget, capped output and dead-kernel recovery."""
        notebook_timeout = Integer(300, help="seconds of execution for the whole notebook").tag(config=True)
        max_output_bytes = Integer(512 * 1024, help="output kept per cell (the rest is dropped)").tag(config=True)

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("kernel_manager_class", sandbox.SandboxKernelManager)
            super().__init__(*args, **kwargs)

        def preprocess(self, nb, resources=None, km=None):
            self._deadline = time.monotonic() + self.notebook_timeout
            self._cell_timeout = self.timeout
            self._dead = None
            self._output_bytes = {}
            return super().preprocess(nb, resources, km)

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
                return cell, resources

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            outputs = kwargs["cell"].get("outputs", [])
            if any(o.output_type == "error" and o.ename == "CellTimeoutError" for o in outputs):
                _event(f"cell {kwargs['cell_index']} timed out after {self.timeout} s")

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

    return SandboxedExecute


def _event(text):
    path = os.environ.get("AUTOGRADER_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


SandboxedExecute = _execute_class()


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
    try:
        submitted = nbformat.read(str(path), as_version=4)
        nbformat.validate(submitted)
    except Exception as e:  # noqa: BLE001: any unreadable file is reported, never fatal
        raise ValueError(f"{path.name} is not a valid notebook: {type(e).__name__}: {str(e)[:200]}") from None
    source = nbformat.read(str(Path(course_root, "source", lesson, f"{lesson}.ipynb")), as_version=4)
    release_path = Path(course_root, "release", lesson, f"{lesson}.ipynb")
    release = nbformat.read(str(release_path), as_version=4) if release_path.exists() else None
    return flag_submission(submitted, source, release)


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
        self.log = open(self.work / "worker.log", "w")
        self.start = time.monotonic()
        self.deadline = self.start + limits.notebook_timeout + HARD_LIMIT_GRACE_S
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading", str(self.work / "job.json")],
                                     cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def finish(self, course_root, timed_out):
        self.log.close()
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
        if r.status == "graded":
            shutil.rmtree(self.work, ignore_errors=True)
        return r


def grade(course_root, lessons=None, students=None, jobs=1, limits=Limits(), log=print):
    """Autograde every submission in course_root/submitted (or those named); return [Result]."""
    course_root = Path(course_root).resolve()
    if not Path(course_root, "gradebook.db").exists():
        raise FileNotFoundError(f"no gradebook in {course_root}: run `python -m autograder release` first")
    todo = submissions(course_root, lessons, students)
    if not todo:
        log(f"nothing to grade in {course_root / 'submitted'}")
        return []
    settings, warnings = sandbox.probe(sandbox_settings(course_root, limits))
    for w in warnings:
        log(f"WARNING: {w}")
    log(f"sandbox: {sandbox.attempt_name(settings)}; grading {len(todo)} submission(s) with {jobs} job(s)")
    threads = max(1, len(os.sched_getaffinity(0)) // max(1, jobs))  # torch threads per kernel
    results, running, queue = [], [], list(todo)
    while queue or running:
        while queue and len(running) < max(1, jobs):
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
        time.sleep(0.2)
        for job in list(running):
            timed_out = time.monotonic() > job.deadline
            if timed_out:
                job.kill()
            if job.proc.poll() is not None:
                running.remove(job)
                results.append(_done(course_root, job.finish(course_root, timed_out), log))
    return results


def _done(course_root, result, log):
    save_flags(course_root, result)
    note = f" [{len(result.flags)} flag(s)]" if result.flags else ""
    log(f"{result.lesson} {result.student}: {result.status} {result.score:g}/{result.max_score:g} "
        f"in {result.seconds:g} s{note}" + (f": {result.error.strip().splitlines()[-1]}" if result.error.strip() else ""))
    return result


if __name__ == "__main__":
    job_file = Path(sys.argv[1])
    outcome = work(json.loads(job_file.read_text()))
    (job_file.parent / "result.json").write_text(json.dumps(outcome))
