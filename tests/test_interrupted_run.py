"""Ctrl-C on the test command leaves nothing of its own running: no Jupyter server, kernel or browser.

A run of tests/site/lab_to_interrupt.py (JupyterLab serving a notebook open in Chromium, its kernel started, as
the browser tests do) is interrupted the way a terminal's Ctrl-C does it, SIGINT to its whole process group, in
one process and under pytest-xdist; or its command is killed, as a CI job's timeout does, and its xdist workers
go without their teardown. Every process whose environment carries the run's marker must then be gone within a
minute (tests/processes.py says how the servers die with the run). The run's parent is a child subreaper, as
systemd is to a developer's terminal: what the run orphans is not reparented to init, which is all a kernel
whose parent died watches for. Each case starts JupyterLab and Chromium (about half a minute): the full run's
(tests/full_run.py). The default run checks the mechanism itself on a `sleep`, in a second.
"""
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests import browser as b
from tests.nbtools import REPO
from tests.processes import dies_with_this_process, processes_with

_missing = b.missing_prerequisite()
if _missing and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"browser tests cannot run under COURSE_CI=1: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"browser tests skipped: {_missing}")

TARGET = "tests/site/lab_to_interrupt.py"


def _wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def _describe(processes):
    return "\n".join(f"  {pid}: {command[:200]}" for pid, command in sorted(processes.items()))


# The run's parent: a child subreaper (PR_SET_CHILD_SUBREAPER), as systemd is to a developer's terminal, so that
# a process orphaned by the run is reparented here and not to init (a kernel whose parent died checks only for
# init); it starts the run in a process group of its own, prints its pid and reaps whatever ends.
_PARENT = """\
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
print(subprocess.Popen(sys.argv[1:], start_new_session=True, stdout=sys.stderr).pid, flush=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
"""


# (pytest-xdist's workers, what ends the run): a terminal's Ctrl-C (SIGINT to the run's whole process group), or
# SIGKILL to the test command alone (a CI job's timeout), whose xdist workers then go without their teardown
@pytest.mark.parametrize("workers, how", [("0", "ctrl-c"), ("2", "ctrl-c"), ("2", "killed")],
                         ids=["ctrl-c", "ctrl-c-under-xdist", "killed-under-xdist"])
def test_an_interrupted_run_leaves_no_server_kernel_or_browser_running(tmp_path, workers, how):
    name, value = "COURSE_TEST_RUN", uuid.uuid4().hex
    marker = f"{name}={value}"
    ready = tmp_path / "ready"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},  # a run of its own, not a worker
           name: value, "INTERRUPT_READY": str(ready)}
    log = open(tmp_path / "run.log", "w")
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                               "-q", "-n", workers, f"--basetemp={tmp_path / 'base'}", TARGET],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    run = int(parent.stdout.readline())
    left = lambda: {pid: command for pid, command in processes_with(marker).items() if pid != parent.pid}  # noqa: E731
    try:
        assert _wait_for(lambda: ready.exists() or not _running(run), 300) and ready.exists(), \
            f"the run never got its notebook's kernel started:\n{(tmp_path / 'run.log').read_text()[-3000:]}"
        kinds = {kind for kind in ("jupyter-lab", "ipykernel_launcher", "chromium")
                 if any(kind in command for command in left().values())}
        assert kinds == {"jupyter-lab", "ipykernel_launcher", "chromium"}, f"not all started:\n{_describe(left())}"
        if how == "ctrl-c":
            os.killpg(run, signal.SIGINT)  # a terminal's Ctrl-C goes to its whole foreground process group
        else:
            os.kill(run, signal.SIGKILL)
        assert _wait_for(lambda: not _running(run), 120), "the run did not end"
        assert _wait_for(lambda: not left(), 60), f"left running after the run ended ({how}):\n{_describe(left())}"
    finally:
        for pid in left():  # whatever a failed check left: never kept past this test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.kill()
        parent.wait()
        log.close()


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_STARTER = """\
import subprocess, sys, time
from tests.processes import dies_with_this_process
print(subprocess.Popen(**dies_with_this_process(["sleep", "300"])).pid, flush=True)
time.sleep(300)
"""


def test_a_process_started_to_die_with_its_starter_ends_when_the_starter_is_killed():
    starter, child = subprocess.Popen([sys.executable, "-c", _STARTER], cwd=REPO, stdout=subprocess.PIPE, text=True), None
    try:
        child = int(starter.stdout.readline())
        assert _wait_for(lambda: "sleep" in open(f"/proc/{child}/cmdline").read(), 10), "the command never ran"
        assert os.getsid(child) == child, "not in a session of its own: a terminal's Ctrl-C would reach it"
        starter.kill()
        starter.wait()
        assert _wait_for(lambda: not _running(child), 10), "the process outlived the one that started it"
    finally:
        starter.kill()
        starter.wait()
        if child and _running(child):
            os.kill(child, signal.SIGKILL)
