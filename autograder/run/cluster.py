"""`grade --scheduler`: grade a class on a Dask cluster, with the same sandboxed worker as local grading.

Each submission (its course.SubmissionPaths) becomes one Dask task, a `Task` that carries what
its grading reads as data: the lesson's source and release notebooks, a gradebook holding the
lesson but no student, the submitted files and the limits. On whichever Dask worker takes it, the
task builds a private course directory in a temporary folder and calls `grading.grade` there: the
same sandboxed kernel, the same flags, the same zero-and-flag for a submission that cannot be
graded, and that grade's own job.Job, made there (a Job names the folders of the machine that
grades it, which the instructor's machine does not know). It returns a `Reply`: that
one-submission gradebook, the autograded notebook and the outcome as data; the instructor's
machine merges them into its own gradebook one at a time, as local grading does, through the
submission's paths. Workers need the course's environment (a clone of this repository with its
requirements installed) but no shared file system.

Faults: a task whose worker dies is retried once on another worker (Dask's
`allowed-failures`); a task that fails twice is entered with zero and flagged. A result is
merged once, when its task completes; Ctrl-C cancels the rest, keeps what finished, and
lists what was not graded.
"""
import dataclasses
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from . import grading
from .. import sandbox
from ..course import REPO, sqlite_url, submission_paths
from ..gradebook import merge, record_failure
from ..job import Finding, JobFolder
from ..outcome import FAILED, GRADED, Outcome
from ..sandbox.limits import Limits

ALLOWED_FAILURES = 1  # a task is retried once when its worker dies, then recorded as failed
_PROBED = {}  # what the sandbox can do on this worker: probed once per worker process, not per job


def _cached_probe(settings):
    key = json.dumps({k: settings.get(k) for k in ("memory_mb", "nproc", "fsize_mb", "cpu_s")}, sort_keys=True)
    if key not in _PROBED:
        probed, warnings = sandbox.probe(settings)
        _PROBED[key] = ({k: probed[k] for k in ("bwrap", "separate_user", "cgroup")}, warnings)
    features, warnings = _PROBED[key]
    return {**sandbox.DEFAULTS, **settings, **features}, list(warnings)


def connect(scheduler):
    """A dask.distributed Client for 'tcp://host:port' or 'local:N' (a local cluster of N worker processes)."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise SystemExit("grading on a cluster needs Dask: pip install -e .[cluster]") from None
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
    if scheduler.startswith("local:"):
        n = int(scheduler.split(":", 1)[1] or 2)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                               env={"PYTHONPATH": str(REPO)})
        return Client(cluster)
    return Client(scheduler, timeout="30s")


def _threads_per_kernel():
    """This machine's cores shared among the Dask worker threads on it: each runs one kernel at a time."""
    cores = len(os.sched_getaffinity(0))
    try:
        from distributed import get_client, get_worker
        host = get_worker().address.rsplit(":", 1)[0]
        slots = sum(w["nthreads"] for address, w in get_client().scheduler_info()["workers"].items()
                    if address.rsplit(":", 1)[0] == host)
    except Exception:  # noqa: BLE001: not on a worker, or the scheduler is busy: assume this worker is alone
        slots = 1
    return max(1, cores // max(1, slots))


def _template_gradebook(paths, folder):
    """A copy of the course gradebook that keeps the lesson's definition (cells, points) and no student."""
    from nbgrader.api import Gradebook
    from sqlalchemy import text
    path = Path(folder, f"{paths.lesson}.db")
    shutil.copyfile(paths.gradebook, path)
    with Gradebook(sqlite_url(path)) as gb:
        for student in [s.id for s in gb.students]:
            gb.remove_student(student)
        gb.db.commit()
        gb.db.execute(text("VACUUM"))
    return path.read_bytes()


@dataclasses.dataclass(frozen=True)
class Task:
    """One submission sent to a Dask worker: everything its grading reads, as data (no shared file system)."""
    lesson: str
    student: str
    limits: Limits
    gradebook: bytes     # the course gradebook with the lesson and no student
    files: dict          # {path in the submission's folder: bytes}
    source: bytes        # the lesson's instructor notebook
    release: bytes       # the lesson's student notebook as released


@dataclasses.dataclass(frozen=True)
class Reply:
    """What a Dask worker sends back: the outcome's record, the shard gradebook, the autograded files."""
    outcome: dict        # outcome.Outcome.record(), or None when grading returned nothing
    gradebook: bytes
    autograded: dict     # {path in the autograded folder: bytes}
    log: list
    worker: str


def make_task(paths, limits, gradebook):
    """The Task of one submission (its course.SubmissionPaths)."""
    folder = paths.submitted.parent
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return Task(paths.lesson, paths.student, limits, gradebook, files, paths.source.read_bytes(),
                paths.release.read_bytes())


def grade_task(task):
    """Runs on a Dask worker: grade one submission in a private course directory; return a Reply."""
    log = []
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as `grade --jobs N` does: kernels do not fight for cores
        os.environ.setdefault(name, str(_threads_per_kernel()))
    with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
        paths = submission_paths(Path(tmp, "course"), task.lesson, task.student)
        given = [(paths.source, task.source), (paths.release, task.release), (paths.gradebook, task.gradebook)]
        for path, data in given + [(paths.submitted.parent / name, data) for name, data in task.files.items()]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        results = grading.grade(paths.course, [task.lesson], [task.student], jobs=1, limits=task.limits,
                                log=log.append, probe=_cached_probe)
        graded = paths.autograded
        return Reply(results[0].record() if results else None, paths.gradebook.read_bytes(),
                     {str(p.relative_to(graded)): p.read_bytes() for p in sorted(graded.rglob("*")) if p.is_file()}
                     if graded.exists() else {}, log, socket.gethostname())


def apply_reply(paths, reply):
    """On the instructor's machine: merge one task's gradebook into the course's, write its autograded notebook;
    returns its outcome.Outcome (recorded by the caller, as local grading records one)."""
    shutil.rmtree(paths.work, ignore_errors=True)
    paths.work.mkdir(parents=True)
    shard = JobFolder(paths.work).gradebook
    shard.write_bytes(reply.gradebook)
    result = Outcome.from_record(reply.outcome)
    result.score, result.max_score, result.pending = merge(sqlite_url(shard), paths.course, paths.lesson,
                                                           paths.student)
    shutil.rmtree(paths.autograded, ignore_errors=True)
    for name, data in reply.autograded.items():
        Path(paths.autograded, name).parent.mkdir(parents=True, exist_ok=True)
        Path(paths.autograded, name).write_bytes(data)
    shutil.rmtree(paths.work, ignore_errors=True)
    return result


def failed_outcome(paths, error):
    """A task that could not run (its workers died twice, or it raised): zero, flagged."""
    result = Outcome(paths.lesson, paths.student, status=FAILED, error=error)
    result.score, result.max_score = record_failure(paths.course, paths.lesson, paths.student)
    result.flags.append(Finding("grading", error.strip().splitlines()[-1] if error.strip() else "failed on the cluster"))
    return result


def grade_cluster(course_root, lessons, students, scheduler, limits=Limits(), log=print, force=False):
    """`grade --scheduler`: the submissions `grade` would take (unchanged ones skipped unless force), on Dask."""
    todo = grading.to_grade(Path(course_root).resolve(), lessons, students, force, log)
    if not todo:
        return []
    log(f"grading {len(todo)} submission(s) on the Dask cluster at {scheduler}")
    return grade_on_cluster(todo, scheduler, limits=limits, log=log)


def grade_on_cluster(todo, scheduler, limits=Limits(), log=print, client=None):
    """Grade [course.SubmissionPaths] on a Dask cluster; merge each outcome as it arrives; return [Outcome]."""
    from distributed import as_completed
    from tqdm.auto import tqdm
    own_client = client is None
    client = client or connect(scheduler)
    if client.dashboard_link:
        log(f"Dask dashboard: {client.dashboard_link}")
    results, futures = [], {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one_per_lesson = {paths.lesson: paths for paths in todo}.values()
            templates = {paths.lesson: _template_gradebook(paths, tmp) for paths in one_per_lesson}
        for paths in todo:
            task = make_task(paths, limits, templates[paths.lesson])
            # pure=False: a re-run of the same task must run again; retries come from allowed-failures
            key = f"grade-{paths.lesson}-{paths.student}-{time.time_ns()}"
            futures[client.submit(grade_task, task, pure=False, key=key)] = paths
        bar = tqdm(total=len(futures), desc="grading", unit="nb")
        failed = 0
        for future in as_completed(futures):
            paths = futures.pop(future)
            try:
                result = apply_reply(paths, future.result())
            except Exception as e:  # noqa: BLE001: KilledWorker twice, a lost task: zero and a flag, never lost
                result = failed_outcome(paths, f"{type(e).__name__}: {e}")
            failed += result.status != GRADED
            results.append(grading.record_result(paths, result, lambda line: bar.write(line)))
            bar.update()
            bar.set_postfix(failed=failed, running=len(futures))
        bar.close()
    except KeyboardInterrupt:  # as local grading does: keep what finished, name the rest, exit 130
        for future in futures:
            future.cancel()
        left = sorted((paths.lesson, paths.student) for paths in futures.values())
        log(f"interrupted: {len(results)} graded and merged; not graded ({len(left)}): "
            + ", ".join(f"{l}/{s}" for l, s in left))
        raise grading.GradingInterrupted("SIGINT", results, left) from None
    finally:
        if own_client:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    return results
