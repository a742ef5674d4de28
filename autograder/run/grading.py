"""`grade`: nbgrader's autograde for a whole class, in parallel, with the kernel sandboxed.

Each (lesson, student) is graded by a worker process of its own, forked by a warm zygote
that has nbgrader imported already (zygote.py: `python -m autograder.run.worker JOB` without its
1.7 s of imports). The worker runs nbgrader's Autograde converter (through NbGraderAPI) on the course directory,
with these changes made through nbgrader's configuration (nbgrader_config.py holds the
preprocessor lists, so plain `nbgrader autograde` applies the same rules, without the sandbox):

- RestoreCellMetadata (restore.py) gives every cell the nbgrader metadata it was released
  with, so a tampered cell no longer fails the whole notebook, and reports what it changed (events); DeduplicateIds turns a
  copied-and-pasted graded cell into an ordinary cell (nbgrader's own leaves metadata that
  its schema check rejects, failing the whole submission);
- GradingExecute runs every graded test cell on the grader's side (verdicts.py): the test,
  its reference values and its comparisons stay in this process and reach the student's code
  only as calls with plain data, so nothing the student's code patches takes part in a verdict;
  the runtime integrity check (integrity.py) after every test cell flags patches for review
  without changing a score; SandboxedExecute adds the kernel launcher of sandbox/, a
  wall-clock budget per notebook, capped output, and a dead kernel (os._exit, a crash, a
  memory limit) failing the remaining cells instead of the whole notebook;
- TestCellOutcome makes a test cell pass or fail on one fact, whether it raised an error,
  before SaveGrades (nbgrader's SaveAutoGrades) reads its outputs; a test cell the grader could
  not run (a GraderSideError) is left for manual grading, pending, never 0;
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
import json
import os
import shutil
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path

import nbformat

from .. import outcome, sandbox
from ..kernel import lesson_modules
from . import zygote
from ..course import REPO, gradebook_path, sqlite_url, step_root, submissions
from ..flags import flag_submission
from ..gradebook import mark_flagged, merge, record_failure
from ..job import FLAGGED, STARVED, Finding, Job, JobFolder, as_flag, pending_flags, read_events
from ..outcome import FAILED, GRADED, INVALID, Outcome
from ..sandbox.limits import Limits


# ---------------------------------------------------------------- the parent

def check_submission(paths):
    """Static flags for one submission (its SubmissionPaths); raises ValueError when the notebook cannot be read."""
    folder, path = paths.submitted.parent, paths.submitted
    if not path.exists():
        raise ValueError(f"no {path.name} in {folder} (found: {', '.join(p.name for p in folder.iterdir()) or 'nothing'})")
    from .. import size  # before nbformat reads it: refuses (ValueError "size: ...") or trims an absurd notebook
    size_flags = size.check(paths)
    try:
        submitted = nbformat.read(str(path), as_version=4)
        nbformat.validate(submitted)
    except Exception as e:  # noqa: BLE001: any unreadable file is reported, never fatal
        raise ValueError(f"{path.name} is not a valid notebook: {type(e).__name__}: {str(e)[:200]}") from None
    source = nbformat.read(str(paths.source), as_version=4)
    release = nbformat.read(str(paths.release), as_version=4) if paths.release.exists() else None
    return size_flags + flag_submission(submitted, source, release)  # what the worker restores, it reports


def job_record(paths, gradebook_url, limits, settings):
    """The job.Job of one submission: each limit once, in `limits` (the worker gives the launcher its share)."""
    launcher_limits = limits.for_the_sandbox()
    return Job(course=str(paths.course.resolve()), lesson=paths.lesson, student=paths.student, gradebook_url=gradebook_url,
               limits=asdict(limits), sandbox={k: v for k, v in settings.items() if k not in launcher_limits})


class _Running:
    """One submission's job under way: its paths (course.SubmissionPaths), folder, worker and outcome."""

    def __init__(self, paths, limits, settings, threads, modules):
        self.paths, self.result = paths, Outcome(paths.lesson, paths.student)
        self.folder = JobFolder(paths.work)
        shutil.rmtree(paths.work, ignore_errors=True)
        paths.work.mkdir(parents=True)
        shutil.copyfile(paths.gradebook, self.folder.gradebook)
        self.db_url = sqlite_url(self.folder.gradebook)
        self.folder.job.write_text(job_record(paths, self.db_url, limits, settings).to_json())
        env = {**os.environ, **self.folder.environment(),
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # N kernels share the cores, unless told otherwise
            env.setdefault(name, str(threads))
        self.start = time.monotonic()
        self.deadline = self.start + limits.notebook_timeout + limits.hard_limit_grace
        self.proc = zygote.start(self.folder.job, self.folder.log, env, modules=modules)

    def kill(self):
        """Stop the worker and its kernels (each in its own process group): nothing of this job runs on."""
        kernels = self.folder.kernels
        groups = [self.proc.pid] + ([int(p) for p in kernels.read_text().split()] if kernels.exists() else [])
        for pgid in [g for g in groups if g > 0]:  # never 0: killpg(0) is our own group
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()

    def abandon(self):
        """Forget an interrupted job: no half-written autograded copy or report is left to be mistaken for a grade."""
        self.kill()
        for path in (self.paths.autograded, self.paths.work):
            shutil.rmtree(path, ignore_errors=True)
        self.paths.report.unlink(missing_ok=True)

    def finish(self, timed_out):
        r = self.result
        r.seconds = round(time.monotonic() - self.start, 1)
        r.events = read_events(self.folder.events)
        reply = self.folder.result
        worker = json.loads(reply.read_text()) if reply.exists() else None
        if timed_out:
            r.status, r.error = FAILED, f"grading ran past the hard limit ({int(self.deadline - self.start)} s)"
        elif worker is None:
            r.status, r.error = FAILED, f"the grading worker died (exit {self.proc.returncode})"
        elif not worker["success"]:
            r.status, r.error = FAILED, (worker["log"][-3000:] + "\n" + worker["error"][-1000:])
        if r.status == GRADED:
            r.score, r.max_score, r.pending = merge(self.db_url, self.paths.course, r.lesson, r.student)
        else:
            r.score, r.max_score = record_failure(self.paths.course, r.lesson, r.student)
            r.flags.append(Finding("grading", r.error.strip().splitlines()[-1] if r.error.strip() else r.status))
        r.flags += [as_flag(e) for e in r.events if e.kind in FLAGGED]
        r.flags += pending_flags(r.pending)
        if r.status == GRADED:
            shutil.rmtree(self.paths.work, ignore_errors=True)
        return r


class GradingInterrupted(Exception):
    """grade() was stopped by SIGINT or SIGTERM; what finished is merged, `not_graded` lists the rest."""

    def __init__(self, signal_name, results, not_graded):
        self.signal_name, self.results, self.not_graded = signal_name, results, not_graded
        super().__init__(f"{signal_name}: {len(results)} submission(s) graded, {len(not_graded)} not graded: "
                         + ", ".join(f"{lesson} {student}" for lesson, student in not_graded))


def grade(course_root, lessons=None, students=None, jobs=1, limits=Limits(), log=print, force=False,
          probe=sandbox.probe):
    """Autograde every submission in course_root/submitted (or those named); return [outcome.Outcome].

    A submission already graded (its report names the same notebook digest) is skipped unless
    `force`. SIGINT or SIGTERM stops the workers and their kernels, keeps every grade that
    finished, and raises GradingInterrupted naming what was not graded: run again to resume.
    """
    course_root = Path(course_root).resolve()
    todo = to_grade(course_root, lessons, students, force, log)
    if not todo:
        return []
    modules = setup_modules(todo)
    zygote.warm(min(max(1, jobs), len(todo)), modules)  # their imports run while the probe does
    settings, sandbox_warnings = probe(sandbox.sandbox_settings(course_root, limits))  # a Dask worker: a cached probe
    for w in sandbox_warnings:
        log(f"WARNING: {w}")
    log(f"sandbox: {sandbox.attempt_name(settings)}; grading {len(todo)} submission(s) with {jobs} job(s)")
    threads = max(1, len(os.sched_getaffinity(0)) // max(1, jobs))  # torch threads per kernel
    results, running, queue, stop, again = [], [], list(todo), [], set()

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
                job = _start(queue.pop(0), limits, settings, threads, modules, results, log)
                running += [job] if job else []
            zygote.wait_any([job.proc for job in running], timeout=0.2)  # wakes when a worker ends
            for job in list(running):
                timed_out = time.monotonic() > job.deadline
                if timed_out:
                    job.kill()
                if job.proc.poll() is not None:
                    running.remove(job)
                    result = job.finish(timed_out)
                    if any(e.kind == STARVED for e in result.events) and job.paths not in again:
                        again.add(job.paths)  # a timeout the busy machine caused: once more, after the others
                        queue.append(job.paths)
                        log(f"{result.lesson} {result.student}: a cell timed out while the machine was too busy to "
                            "run its kernel; graded again after the others")
                        continue
                    results.append(record_result(job.paths, result, log))
        if stop:
            _stop(stop[0], running, queue, results, log)
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    return results


def to_grade(course_root, lessons, students, force, log):
    """[course.SubmissionPaths] to grade now: those submitted, less those already graded (unless `force`)."""
    if not gradebook_path(course_root).exists():
        raise FileNotFoundError(f"no gradebook in {course_root}: run `python -m autograder release` first")
    todo = submissions(course_root, lessons, students)
    done = [] if force else [paths for paths in todo if outcome.already_graded(paths)]
    if done:
        log(f"skipping {len(done)} submission(s) already graded (--force regrades them)")
    todo = [t for t in todo if t not in done]
    if not todo:
        log(f"nothing to grade in {step_root(course_root, 'submitted')}")
    return todo


def setup_modules(todo):
    """What the grader-side tests of the lessons of `todo` ([course.SubmissionPaths]) import (their set-up's imports,
    with zygote.preload's additions): the workers' zygotes import it once."""
    modules = set()
    for source_path in sorted({paths.source for paths in todo}):
        try:
            source = nbformat.read(str(source_path), as_version=4)
        except Exception:  # noqa: BLE001: the lesson's worker reports an unreadable source
            continue
        modules |= lesson_modules(source)
    return zygote.preload(modules)


def _start(paths, limits, settings, threads, modules, results, log):
    """A running job for the submission, or None when it cannot be read (entered with zero and flagged)."""
    try:
        flags = check_submission(paths)
    except ValueError as e:
        r = Outcome(paths.lesson, paths.student, status=INVALID, error=str(e), flags=[Finding("invalid", str(e))])
        r.score, r.max_score = record_failure(paths.course, paths.lesson, paths.student)
        results.append(record_result(paths, r, log))
        return None
    job = _Running(paths, limits, settings, threads, modules)
    job.result.flags = flags
    return job


def _stop(signal_name, running, queue, results, log):
    """After SIGINT/SIGTERM: keep what finished, abandon the rest, raise GradingInterrupted naming it."""
    not_graded = []
    for job in running:
        if job.proc.poll() is not None and job.folder.result.exists():  # finished meanwhile
            results.append(record_result(job.paths, job.finish(False), log))
        else:
            job.abandon()
            not_graded.append((job.result.lesson, job.result.student))
    interrupted = GradingInterrupted(signal_name, results, not_graded + [(p.lesson, p.student) for p in queue])
    log(f"{interrupted}\nrun the same command again to grade the rest (finished grades are kept)")
    raise interrupted


def record_result(paths, result, log):
    """Stamp, save and log one finished outcome: nbgrader's flag in the gradebook (formgrader shows it), the report
    (outcome.write); returns it."""
    result.submission = outcome.digest(paths)
    mark_flagged(paths.course, result.lesson, result.student, result.flags)
    outcome.write(paths, result)
    note = f" [{len(result.flags)} flag(s)]" if result.flags else ""
    note += f" [pending manual grading: {', '.join(result.pending)}]" if result.pending else ""
    log(f"{result.lesson} {result.student}: {result.status} {result.score:g}/{result.max_score:g} "
        f"in {result.seconds:g} s{note}" + (f": {result.error.strip().splitlines()[-1]}" if result.error.strip() else ""))
    return result


