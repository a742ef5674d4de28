"""Warm grading workers (autograder/run/zygote.py) and sliced kernel waits (autograder/nbrun.py).

The jobs here are small Python scripts run with runpy.run_path in place of a grading job,
so each test takes a second, not a kernel's worth.
"""
import asyncio
import json
import os
import signal
import time
from queue import Empty

import pytest

from autograder import nbrun
from autograder.run import zygote

REPORT = """
import json, os, sys
from pathlib import Path
here = Path(__file__).parent
(here / "report.json").write_text(json.dumps(dict(
    pid=os.getpid(), ppid=os.getppid(), pgid=os.getpgid(0), sid=os.getsid(0), cwd=os.getcwd(), env=dict(os.environ),
    grading_imported="nbgrader.apps" in sys.modules,
    imported=[m for m in ("numpy", "torch", "torch._dynamo") if m in sys.modules])))
print("to the log")
"""


def run_job(tmp_path, script, env=None, name="job", modules=()):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "job.py").write_text(script)
    worker = zygote.start(folder / "job.py", folder / "worker.log", env or {"JOB_NAME": name}, target="runpy:run_path",
                          modules=modules)
    return folder, worker


def test_a_worker_is_a_fresh_process_with_the_jobs_environment_and_its_own_group(tmp_path):
    folder, worker = run_job(tmp_path, REPORT, env={"ONLY_THIS": "1"})
    assert worker.wait() == 0
    report = json.loads((folder / "report.json").read_text())
    assert report["pid"] == worker.pid != os.getpid()
    assert report["pgid"] == worker.pid, "its own process group, killed with killpg"
    assert report["sid"] != os.getsid(0), "not in the grader's session: Ctrl-C at the terminal reaches the grader only"
    assert report["env"] == {"ONLY_THIS": "1"}, "the job's environment, nothing of the zygote's"
    assert report["grading_imported"], "the zygote's imports are inherited: the point of it"
    assert (folder / "worker.log").read_text() == "to the log\n"


def test_a_zygote_is_reused_and_every_job_gets_a_new_process(tmp_path):
    zygote.close_idle()
    pids = []
    for name in ("first", "second"):
        folder, worker = run_job(tmp_path, REPORT, name=name)
        assert worker.wait() == 0
        pids.append(json.loads((folder / "report.json").read_text())["pid"])
    assert pids[0] != pids[1]
    assert len(zygote._IDLE) == 1, "one zygote served both jobs"


def test_a_zygote_imports_what_its_lessons_tests_import_and_no_more(tmp_path):
    zygote.close_idle()
    reports = {}
    jobs = (("small", ("numpy",)), ("torch", ("torch.nn",)), ("small-again", ("numpy",)), ("torch-again", ("torch",)))
    for name, modules in jobs:
        folder, worker = run_job(tmp_path, REPORT, name=name, modules=zygote.preload(modules))
        assert worker.wait() == 0
        reports[name] = json.loads((folder / "report.json").read_text())
    assert reports["small"]["imported"] == ["numpy"], "a lesson without torch does not wait for torch"
    assert reports["torch"]["imported"] == ["numpy", "torch", "torch._dynamo"], "torch comes with torch._dynamo"
    assert reports["small-again"]["ppid"] == reports["small"]["ppid"] != reports["torch"]["ppid"]
    assert reports["torch-again"]["ppid"] == reports["torch"]["ppid"], "one zygote serves every module of a package"
    assert len(zygote._IDLE) == 2


def test_the_modules_of_a_grading_run_are_what_its_lessons_set_up_imports(tmp_path):
    import shutil

    from autograder.course import submission_paths
    from autograder.run.grading import setup_modules
    from tests.autograder import tiny
    from tests.nbtools import LESSONS, SOLUTIONS
    for lesson in (tiny.LESSON, LESSONS[0]):
        (tmp_path / "source" / lesson).mkdir(parents=True)
    tiny.write_lesson(tmp_path / "source" / tiny.LESSON / f"{tiny.LESSON}.ipynb")
    shutil.copy(SOLUTIONS / f"{LESSONS[0]}.ipynb", tmp_path / "source" / LESSONS[0])
    def of(*lessons):
        return [submission_paths(tmp_path, lesson, "ann") for lesson in lessons]
    assert setup_modules(of(tiny.LESSON)) == ("numpy", "time")
    modules = setup_modules(of(LESSONS[0]))
    assert {"torch", "torch._dynamo", "course_utils"} <= set(modules) and "numpy" not in modules
    assert setup_modules(of(LESSONS[0], "no_such_lesson")) == modules, "a missing source is for its worker to report"


def test_a_failing_job_reports_its_exit_status_and_traceback(tmp_path):
    folder, worker = run_job(tmp_path, "raise SystemExit(3)")
    assert worker.wait() == 1
    folder, worker = run_job(tmp_path, "1 / 0", name="zero")
    assert worker.wait() == 1
    assert "ZeroDivisionError" in (folder / "worker.log").read_text()


def test_a_killed_worker_reports_the_signal_and_the_zygote_serves_on(tmp_path):
    folder, worker = run_job(tmp_path, "import time\ntime.sleep(60)")
    os.killpg(worker.pid, signal.SIGKILL)  # at once: the group exists as soon as the pid is known
    assert worker.wait() == -signal.SIGKILL
    folder, worker = run_job(tmp_path, REPORT, name="after")
    assert worker.wait() == 0


def _gone(pid, within_s=10):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if b"State:\tZ" in open(f"/proc/{pid}/status", "rb").read():
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_a_dead_zygote_is_never_reused_and_takes_its_worker_with_it(tmp_path):
    folder, worker = run_job(tmp_path, "import time\ntime.sleep(60)")
    worker.zygote.proc.kill()
    assert worker.wait() == -1, "the zygote died: the job counts as a dead worker"
    assert worker.zygote not in zygote._IDLE
    assert _gone(worker.pid), "the worker dies with its zygote (parent-death signal)"
    folder, worker = run_job(tmp_path, REPORT, name="after")
    assert worker.wait() == 0


def test_a_grader_killed_outright_takes_its_zygote_and_running_worker_with_it(tmp_path):
    import subprocess
    import sys
    (tmp_path / "job.py").write_text("import time\ntime.sleep(60)")
    grader = subprocess.Popen([sys.executable, "-c", f"""
import os, sys, time
sys.path.insert(0, {str(zygote.REPO)!r})
from autograder.run import zygote
w = zygote.start({str(tmp_path / "job.py")!r}, {str(tmp_path / "log")!r}, {{}}, target="runpy:run_path")
print(w.zygote.proc.pid, w.pid, flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    zygote_pid, worker_pid = (int(p) for p in grader.stdout.readline().split())
    grader.kill()
    grader.wait()
    assert _gone(zygote_pid) and _gone(worker_pid), "nothing of the job outlives a grader killed with SIGKILL"


class MissedEdgeChannel:
    """A channel whose poll, like pyzmq's after a missed edge, sleeps its whole timeout when the
    message arrives after the poll began, and only a new poll sees it."""

    def __init__(self, arrives_after_s):
        self.arrival = time.monotonic() + arrives_after_s

    async def get_msg(self, timeout=None):
        if time.monotonic() >= self.arrival:
            return {"msg_type": "execute_reply"}
        await asyncio.sleep(timeout)
        raise Empty


def test_sliced_waits_find_a_message_the_first_poll_missed():
    channel = MissedEdgeChannel(arrives_after_s=0.2)
    start = time.monotonic()
    msg = asyncio.run(nbrun.sliced(channel.get_msg)(timeout=30))
    assert msg["msg_type"] == "execute_reply"
    assert time.monotonic() - start < 10, "found at the next slice, not at the 30 s timeout"


def test_sliced_waits_keep_the_deadline():
    channel = MissedEdgeChannel(arrives_after_s=3600)
    start = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(nbrun.sliced(channel.get_msg)(timeout=0.5))
    assert 0.5 <= time.monotonic() - start < 5


@pytest.mark.parametrize("error", [KeyError("header"), ValueError("Duplicate Signature")])
def test_a_message_the_client_cannot_read_ends_the_wait_as_a_dead_kernel(error):
    """jupyter_client's deserialize raises on a message a patched kernel packed: a crash of the kernel, never of
    the grading (nbclient's DeadKernelError, which the grader reports as a runtime flag)."""
    from nbclient.exceptions import DeadKernelError

    async def get_msg(timeout=None):
        raise error
    with pytest.raises(DeadKernelError, match=nbrun.UNREADABLE):
        asyncio.run(nbrun.sliced(get_msg)(timeout=1))


def test_wait_any_wakes_when_a_worker_ends_not_at_the_timeout(tmp_path):
    folder, slow = run_job(tmp_path, "import time\ntime.sleep(60)", name="slow")
    folder, quick = run_job(tmp_path, "import time\ntime.sleep(0.3)", name="quick")
    start = time.monotonic()
    while quick.poll() is None:
        zygote.wait_any([slow, quick], timeout=30)
    assert time.monotonic() - start < 10 and slow.poll() is None
    os.killpg(slow.pid, signal.SIGKILL)
    assert slow.wait() == -signal.SIGKILL
