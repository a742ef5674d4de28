"""`grade --scheduler`: grade a class on a Dask cluster, with the same sandboxed worker as local grading.

Each (lesson, student) becomes one Dask task that carries what it needs as data: the
lesson's source and release notebooks, a gradebook holding the lesson but no student, the
submitted files and the limits. On whichever Dask worker takes it, the task builds a
private course directory in a temporary folder and calls `grading.grade` there: the same
sandboxed kernel, the same flags, the same zero-and-flag for a submission that cannot be
graded. It returns that one-submission gradebook, the autograded notebook and the report
as data; the instructor's machine merges them into its own gradebook one at a time, as
local grading does. Workers need the course's environment (a clone of this repository
with its requirements installed) but no shared file system.

Faults: a task whose worker dies is retried once on another worker (Dask's
`allowed-failures`); a task that fails twice is entered with zero and flagged. A result is
merged once, when its task completes; Ctrl-C cancels the rest, keeps what finished, and
lists what was not graded.
"""
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from . import grading
from .. import sandbox
from ..course import REPO, gradebook_path, sqlite_url, step_folder, step_notebook, submission_paths, work_folder
from ..gradebook import merge, record_failure
from ..job import Finding, JobFolder

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


def _template_gradebook(course_root, lesson, folder):
    """A copy of the course gradebook that keeps the lesson's definition (cells, points) and no student."""
    from nbgrader.api import Gradebook
    from sqlalchemy import text
    path = Path(folder, f"{lesson}.db")
    shutil.copyfile(gradebook_path(course_root), path)
    with Gradebook(sqlite_url(path)) as gb:
        for student in [s.id for s in gb.students]:
            gb.remove_student(student)
        gb.db.commit()
        gb.db.execute(text("VACUUM"))
    return path.read_bytes()


def make_job(course_root, lesson, student, limits, template):
    folder = step_folder(course_root, "submitted", lesson, student)
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return dict(lesson=lesson, student=student, limits=limits.__dict__, gradebook=template, files=files,
                source=step_notebook(course_root, "source", lesson).read_bytes(),
                release=step_notebook(course_root, "release", lesson).read_bytes())


def grade_job(job):
    """Runs on a Dask worker: grade one submission in a private course directory; return the results as data."""
    lesson, student = job["lesson"], job["student"]
    log = []
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as `grade --jobs N` does: kernels do not fight for cores
        os.environ.setdefault(name, str(_threads_per_kernel()))
    with tempfile.TemporaryDirectory(prefix="autograder-job-") as tmp:
        course = Path(tmp, "course")
        for kind, data in (("source", job["source"]), ("release", job["release"])):
            step_folder(course, kind, lesson).mkdir(parents=True)
            step_notebook(course, kind, lesson).write_bytes(data)
        for name, data in job["files"].items():
            target = step_folder(course, "submitted", lesson, student) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        gradebook_path(course).write_bytes(job["gradebook"])
        results = grading.grade(course, [lesson], [student], jobs=1, limits=grading.Limits(**job["limits"]),
                                log=log.append, probe=_cached_probe)
        autograded = step_folder(course, "autograded", lesson, student)
        return dict(lesson=lesson, student=student, result=results[0].record() if results else None,
                    gradebook=gradebook_path(course).read_bytes(), log=log, worker=socket.gethostname(),
                    autograded={str(p.relative_to(autograded)): p.read_bytes()
                                for p in sorted(autograded.rglob("*")) if p.is_file()} if autograded.exists() else {})


def apply_reply(course_root, reply):
    """On the instructor's machine: merge one task's gradebook, write its autograded notebook and report."""
    lesson, student = reply["lesson"], reply["student"]
    work = work_folder(course_root, lesson, student)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shard = JobFolder(work).gradebook
    shard.write_bytes(reply["gradebook"])
    result = grading.Result.from_record(reply["result"])
    result.score, result.max_score, result.pending = merge(sqlite_url(shard), course_root, lesson, student)
    target = step_folder(course_root, "autograded", lesson, student)
    shutil.rmtree(target, ignore_errors=True)
    for name, data in reply["autograded"].items():
        Path(target, name).parent.mkdir(parents=True, exist_ok=True)
        Path(target, name).write_bytes(data)
    shutil.rmtree(work, ignore_errors=True)
    return result


def failed_result(course_root, lesson, student, error):
    """A task that could not run (its workers died twice, or it raised): zero, flagged."""
    result = grading.Result(lesson, student, status="failed", error=error)
    result.score, result.max_score = record_failure(course_root, lesson, student)
    result.flags.append(Finding("grading", error.strip().splitlines()[-1] if error.strip() else "failed on the cluster"))
    return result


def grade_cluster(course_root, lessons, students, scheduler, limits=grading.Limits(), log=print, force=False):
    """`grade --scheduler`: the submissions `grade` would take (unchanged ones skipped unless force), on Dask."""
    course_root = Path(course_root).resolve()
    todo = [(paths.lesson, paths.student) for paths in grading.to_grade(course_root, lessons, students, force, log)]
    if not todo:
        return []
    log(f"grading {len(todo)} submission(s) on the Dask cluster at {scheduler}")
    return grade_on_cluster(course_root, todo, scheduler, limits=limits, log=log)


def grade_on_cluster(course_root, todo, scheduler, limits=grading.Limits(), log=print, client=None):
    """Grade [(lesson, student)] on a Dask cluster; merge each result as it arrives; return [Result]."""
    from distributed import as_completed
    from tqdm.auto import tqdm
    course_root = Path(course_root).resolve()
    own_client = client is None
    client = client or connect(scheduler)
    if client.dashboard_link:
        log(f"Dask dashboard: {client.dashboard_link}")
    results, futures = [], {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            templates = {lesson: _template_gradebook(course_root, lesson, tmp) for lesson in sorted({l for l, _ in todo})}
        for lesson, student in todo:
            job = make_job(course_root, lesson, student, limits, templates[lesson])
            # pure=False: a re-run of the same job must run again; retries come from allowed-failures
            futures[client.submit(grade_job, job, pure=False, key=f"grade-{lesson}-{student}-{time.time_ns()}")] = (lesson, student)
        bar = tqdm(total=len(futures), desc="grading", unit="nb")
        failed = 0
        for future in as_completed(futures):
            lesson, student = futures.pop(future)
            try:
                result = apply_reply(course_root, future.result())
            except Exception as e:  # noqa: BLE001: KilledWorker twice, a lost task: zero and a flag, never lost
                result = failed_result(course_root, lesson, student, f"{type(e).__name__}: {e}")
            failed += result.status != "graded"
            paths = submission_paths(course_root, lesson, student)
            results.append(grading.record_result(paths, result, lambda line: bar.write(line)))
            bar.update()
            bar.set_postfix(failed=failed, running=len(futures))
        bar.close()
    except KeyboardInterrupt:  # as local grading does: keep what finished, name the rest, exit 130
        for future in futures:
            future.cancel()
        left = sorted(futures.values())
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
