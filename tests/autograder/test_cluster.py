"""`grade --scheduler`: a real Dask scheduler and two workers on localhost grade a class.

Six students of the test run's graded class (tests/graded_class.py: honest, unstarted, half done,
broken JSON, a patch, a crash) are graded again on the cluster; grades, flags and CSV rows must
equal the local ones. Then a worker is killed mid-run (the small lesson of tiny_course): every
submission still gets exactly one grade.
"""
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed", reason="Dask is the optional extra `cluster`: pip install -e .[cluster]")

from autograder.course import submission_paths, submissions  # noqa: E402
from autograder.export import export  # noqa: E402
from autograder.run import GradingInterrupted, cluster  # noqa: E402
from tests.autograder import tiny  # noqa: E402
from tests.autograder.hostile import QUICKEST  # noqa: E402
from tests.graded_class import LIMITS  # noqa: E402
from tests.nbtools import REPO, fill_solutions, load, submit  # noqa: E402
from tests.processes import dies_with_this_process  # noqa: E402

# students of the graded class's hostile lesson: honest, unstarted, half done, broken, a patch, a crash
ON_CLUSTER = ["perfect", "blank", "partial", "invalid_json", "monkeypatch", "os_exit"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(cluster.ALLOWED_FAILURES)}
    # a session of its own, ended with this process (tests/processes.py): an interrupted run leaves no Dask behind
    return subprocess.Popen(**dies_with_this_process([sys.executable, "-m", *args]), cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def dask_cluster():
    """`dask scheduler` and two `dask worker` processes on localhost: {address, workers: [Popen]}."""
    from distributed import Client
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = _start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                        "--dashboard-address", ":0"])
    workers = [_start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--nworkers", "1",
                       "--name", f"w{i}", "--no-dashboard"]) for i in range(2)]
    try:
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
        yield dict(address=address, workers=workers, start_worker=lambda name: _start(
            ["distributed.cli.dask_worker", address, "--nthreads", "1", "--nworkers", "1", "--name", name,
             "--no-dashboard"]))
    finally:
        for proc in workers + [scheduler]:
            _stop(proc)


def _copy_of_students(released_course, graded_class, lesson, students, course):
    """A fresh course holding these students' submissions of `lesson` as the graded class received them."""
    shutil.copytree(released_course, course)
    for student in students:
        shutil.copytree(graded_class.course / "submitted" / student / lesson, course / "submitted" / student / lesson)
    return course


def _tiny_class(tiny_course, tmp_path):
    """tiny_course with six submissions: two honest, two unstarted, two half done."""
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    blank = load(course / "release" / tiny.LESSON / f"{tiny.LESSON}.ipynb")
    kinds = {"honest": fill_solutions(blank, tiny.lesson()), "blank": blank,
             "half": fill_solutions(blank, tiny.lesson(), ["double"])}
    for kind, nb in kinds.items():
        for i in (1, 2):
            submit(course, tiny.LESSON, f"{kind}{i}", nb)
    return course


def _rows(grades_csv, lesson=None, students=None):
    """(student, lesson, score, max score) of the CSV's rows, of one lesson and some students if given."""
    with open(grades_csv) as f:
        return sorted((r["student_id"], r["assignment"], r["score"], r["max_score"]) for r in csv.DictReader(f)
                      if lesson in (None, r["assignment"]) and (students is None or r["student_id"] in students))


def _flags_and_scores(results):
    flags = {r.student: sorted(f.split(":")[0] for f in r.flags) for r in results}
    scores = {r.student: (r.status, r.score, r.max_score) for r in results}
    return flags, scores


def test_cluster_grades_equal_local_grades(released_course, graded_class, tmp_path, dask_cluster):
    lesson = QUICKEST
    course = _copy_of_students(released_course, graded_class, lesson, ON_CLUSTER, tmp_path / "course")
    on_dask = cluster.grade_on_cluster(submissions(course), dask_cluster["address"], limits=LIMITS,
                                       log=lambda *a: None)
    assert sorted(r.student for r in on_dask) == sorted(ON_CLUSTER)
    grades_csv, _ = export(course, course / "export", log=lambda *a: None)
    assert _rows(grades_csv, lesson) == _rows(graded_class.grades_csv, lesson, ON_CLUSTER)
    assert _flags_and_scores(on_dask) == _flags_and_scores([graded_class.results[lesson, s] for s in ON_CLUSTER])
    scores = {r.student: r.score for r in on_dask}
    assert scores["perfect"] > scores["partial"] > 0 == scores["blank"] == scores["invalid_json"]
    reports = json.loads((course / "reports" / lesson / "monkeypatch.json").read_text())
    assert reports["flags"], "a rebinding of cu.check_close must be flagged on the cluster too"
    assert (course / "autograded" / "perfect" / lesson / f"{lesson}.ipynb").exists()


def test_worker_killed_mid_run_loses_no_grade(tiny_course, tmp_path, dask_cluster):
    course = _tiny_class(tiny_course, tmp_path)
    todo = submissions(course)
    victim = dask_cluster["workers"][0]

    def kill_soon():
        time.sleep(tiny.SECONDS + 2)  # both workers are busy with their first notebook
        os.killpg(victim.pid, signal.SIGKILL)

    import threading
    killer = threading.Thread(target=kill_soon)
    killer.start()
    try:
        results = cluster.grade_on_cluster(todo, dask_cluster["address"], limits=LIMITS, log=lambda *a: None)
    finally:
        killer.join()
        dask_cluster["workers"][0] = dask_cluster["start_worker"]("w0-restarted")
    assert sorted((r.lesson, r.student) for r in results) == sorted((p.lesson, p.student) for p in todo), \
        "every submission exactly once"
    grades_csv, _ = export(course, course / "export", log=lambda *a: None)
    assert sorted(s for s, *_ in _rows(grades_csv)) == sorted(p.student for p in todo), "one CSV row per student"
    scores = _flags_and_scores(results)[1]
    assert scores["honest1"][1] == scores["honest1"][2] and scores["honest2"][1] == scores["honest2"][2]


def test_ctrl_c_under_a_scheduler_ends_as_local_grading_does(monkeypatch, tmp_path):
    """Ctrl-C while results arrive: the same GradingInterrupted as local grading (`grade` exits 130), naming
    what was not graded; it used to return normally (exit 0)."""
    import distributed

    class Future:
        def cancel(self):
            pass

    class Client:
        dashboard_link = None

        def submit(self, fn, job, **kwargs):
            return Future()

    def interrupted(futures):
        raise KeyboardInterrupt
        yield  # noqa: unreachable: a generator, as distributed.as_completed is

    monkeypatch.setattr(distributed, "as_completed", interrupted)
    monkeypatch.setattr(cluster, "_template_gradebook", lambda *a: None)
    monkeypatch.setattr(cluster, "make_task", lambda *a: None)
    todo = [submission_paths(tmp_path, "01_x", student) for student in ("alice", "bob")]
    with pytest.raises(GradingInterrupted) as stopped:
        cluster.grade_on_cluster(todo, "tcp://nowhere:1", client=Client(), log=lambda line: None)
    assert sorted(stopped.value.not_graded) == [("01_x", "alice"), ("01_x", "bob")] and stopped.value.results == []
