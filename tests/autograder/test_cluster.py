"""`grade --scheduler`: a real Dask scheduler and two workers on localhost grade a class.

The class (a dozen submissions of the quickest lesson: honest, blank, half done, broken,
hostile) is graded twice, locally with --jobs 2 and on the cluster; grades, flags and the
CSV must be equal. Then a worker is killed mid-run: every submission still gets exactly
one grade.
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

import nbformat
import pytest

pytest.importorskip("distributed", reason="Dask is the optional extra `cluster`: pip install -e .[cluster]")

from autograder import cluster  # noqa: E402
from autograder.feedback import export  # noqa: E402
from autograder.grading import Limits, grade, submissions  # noqa: E402
from tests.nbtools import REPO, SOLUTIONS, fill_solutions, load, solution_ids  # noqa: E402

LESSON = "03_queries_keys_values"
LIMITS = Limits(cell_timeout=15, notebook_timeout=90)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(cluster.ALLOWED_FAILURES)}
    return subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, env=env, start_new_session=True,
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


def _class_notebooks(course):
    blank = load(course / "release" / LESSON / f"{LESSON}.ipynb")
    solution = load(SOLUTIONS / f"{LESSON}.ipynb")
    full = fill_solutions(blank, solution)
    ids = solution_ids(full)
    tamper = nbformat.reads(nbformat.writes(full), as_version=4)
    tamper.cells.insert(1, nbformat.v4.new_code_cell("import course_utils as cu\ncu.check_close = lambda *a, **k: None"))
    crash = nbformat.reads(nbformat.writes(full), as_version=4)
    crash.cells.insert(1, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    kinds = {
        "honest": nbformat.writes(full),
        "blank": nbformat.writes(blank),
        "half": nbformat.writes(fill_solutions(blank, solution, ids[: len(ids) // 2])),
        "broken": '{"cells": [ not json',
        "tamper": nbformat.writes(tamper),
        "crash": nbformat.writes(crash),
    }
    return {f"{kind}{i}": text for kind, text in kinds.items() for i in (1, 2)}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    from autograder.course import release
    course = tmp_path_factory.mktemp("released") / "course"
    release(course, [LESSON], notebooks=None, log=lambda *a: None)
    return course


def _class_course(released, tmp_path, kinds=None):
    course = tmp_path / "course"
    shutil.copytree(released, course)
    for student, text in _class_notebooks(course).items():
        if kinds and student.rstrip("12") not in kinds:
            continue
        folder = course / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(text)
    return course


def _outcome(course, results):
    grades_csv, _ = export(course, course / "export", log=lambda *a: None)
    with open(grades_csv) as f:
        rows = sorted((r["student_id"], r["assignment"], r["score"], r["max_score"]) for r in csv.DictReader(f))
    flags = {r.student: sorted(f.split(":")[0] for f in r.flags) for r in results}
    scores = {r.student: (r.status, r.score, r.max_score) for r in results}
    return rows, flags, scores


def test_cluster_grades_equal_local_grades(released, tmp_path, dask_cluster):
    local_course = _class_course(released, tmp_path / "local")
    local = grade(local_course, jobs=2, limits=LIMITS, log=lambda *a: None)
    dask_course = _class_course(released, tmp_path / "dask")
    on_dask = cluster.grade_on_cluster(dask_course, submissions(dask_course), dask_cluster["address"],
                                       limits=LIMITS, log=lambda *a: None)
    assert len(on_dask) == len(local) == 12
    assert _outcome(dask_course, on_dask) == _outcome(local_course, local)
    scores = {r.student: r.score for r in on_dask}
    assert scores["honest1"] == scores["honest2"] > scores["half1"] > 0 == scores["blank1"] == scores["broken1"]
    reports = json.loads((dask_course / "reports" / LESSON / "tamper1.json").read_text())
    assert reports["flags"], "a rebinding of cu.check_close must be flagged on the cluster too"
    assert (dask_course / "autograded" / "honest1" / LESSON / f"{LESSON}.ipynb").exists()


def test_worker_killed_mid_run_loses_no_grade(released, tmp_path, dask_cluster):
    course = _class_course(released, tmp_path, kinds=("honest", "blank", "half"))
    todo = submissions(course)
    victim = dask_cluster["workers"][0]

    def kill_soon():
        time.sleep(8)  # both workers are busy with their first notebook
        os.killpg(victim.pid, signal.SIGKILL)

    import threading
    killer = threading.Thread(target=kill_soon)
    killer.start()
    try:
        results = cluster.grade_on_cluster(course, todo, dask_cluster["address"], limits=LIMITS,
                                           log=lambda *a: None)
    finally:
        killer.join()
        dask_cluster["workers"][0] = dask_cluster["start_worker"]("w0-restarted")
    assert sorted((r.lesson, r.student) for r in results) == sorted(todo), "every submission exactly once"
    rows, _, scores = _outcome(course, results)
    assert sorted(s for s, *_ in rows) == sorted(s for _, s in todo), "one CSV row per student"
    assert scores["honest1"][1] == scores["honest1"][2] and scores["honest2"][1] == scores["honest2"][2]
