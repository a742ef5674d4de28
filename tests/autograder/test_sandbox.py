"""The grading sandbox, claim by claim (docs/instructors.md, "What the sandbox guarantees").

Each test starts real kernels through autograder.sandbox, as the grader does. The full sandbox
needs root and bubblewrap: elsewhere these tests are skipped with the reason, except in CI
(COURSE_CI=1), where they must run.
"""
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox
from autograder.sandbox import policy, sandbox_settings
from autograder.sandbox.limits import Limits
from tests.autograder import tiny
from tests.nbtools import REPO, SOLUTIONS, fill_solutions, load, submit
from tests.prerequisites import require, why_no_full_sandbox

LESSON = "03_queries_keys_values"


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    require(why_no_full_sandbox())
    course = tmp_path_factory.mktemp("course")
    found, warnings = sandbox.probe(sandbox_settings(course, Limits()))
    assert found["bwrap"] and found["separate_user"], warnings
    return found


class Kernel:
    """A sandboxed kernel in its own event loop: run(code) returns what the code printed."""

    def __init__(self, settings, cwd):
        self.loop = asyncio.new_event_loop()
        self.km = sandbox.SandboxKernelManager(kernel_name="python3")
        self.km.sandbox = settings
        self.loop.run_until_complete(self.km.start_kernel(cwd=str(cwd)))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.loop.run_until_complete(self.kc.wait_for_ready(timeout=120))

    def run(self, code, timeout=120):
        return self.loop.run_until_complete(self._run(code, timeout))

    async def _run(self, code, timeout):
        msg_id, out = self.kc.execute(code), []
        while True:
            msg = await self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append(f"{msg['content']['ename']}: {msg['content']['evalue']}\n")
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)

    def close(self):
        self.kc.stop_channels()
        self.loop.run_until_complete(self.km.shutdown_kernel(now=True))
        self.loop.close()


@pytest.fixture(scope="module")
def two_kernels(settings, tmp_path_factory):
    """Two kernels running at once, as two grading jobs; B has a file in its folder and its /tmp."""
    folders = [tmp_path_factory.mktemp("job_a"), tmp_path_factory.mktemp("job_b")]
    (folders[1] / "secret_b.txt").write_text("B's work")
    kernels = [Kernel(settings, f) for f in folders]
    kernels[1].run("open('/tmp/note_b.txt', 'w').write('from B')")
    yield kernels, folders
    for k in kernels:
        k.close()


def _probe(kernel, paths):
    """{path: what the kernel got reading it}: 'missing', 'denied' or the first bytes."""
    code = (f"import json, os\nout = {{}}\nfor p in {json.dumps([str(p) for p in paths])}:\n"
            "    try:\n"
            "        out[p] = sorted(os.listdir(p))[:5] if os.path.isdir(p) else open(p).read(20)\n"
            "    except FileNotFoundError:\n        out[p] = 'missing'\n"
            "    except PermissionError:\n        out[p] = 'denied'\n"
            "print(json.dumps(out))\n")
    return json.loads(kernel.run(code).strip().splitlines()[-1])


def test_each_kernel_runs_as_its_own_unprivileged_uid(two_kernels):
    (a, b), _ = two_kernels
    uids = [int(k.run("import os; print(os.getuid())")) for k in (a, b)]
    assert 0 not in uids and uids[0] != uids[1], uids


def test_kernel_sees_its_own_submission_folder(two_kernels):
    (_, b), (_, folder_b) = two_kernels
    assert b.run("import os; print(os.getcwd(), open('secret_b.txt').read())").split() == [str(folder_b), "B's", "work"]


def test_kernel_cannot_see_another_jobs_files(settings, two_kernels):
    (a, b), (_, folder_b) = two_kernels
    runtime_b = os.path.dirname(b.km.connection_file)
    seen = _probe(a, [folder_b / "secret_b.txt", folder_b, runtime_b, "/tmp/note_b.txt"])
    assert set(seen.values()) <= {"missing", "denied"}, seen
    own = {"home", os.path.basename(os.path.dirname(a.km.connection_file)), folder_b.parts[2]}  # + its folder's top
    # where the Python installation (a venv in /tmp/<name>/venv, say) lies under /tmp, its mount point shows there,
    # read-only and the same for every kernel: the interpreter, not another job's files
    own |= {Path(p).parts[2] for p in settings["read_only"] if Path(p).parts[:2] == ("/", "tmp") and len(Path(p).parts) > 2}
    assert set(eval(a.run("import os; print(sorted(os.listdir('/tmp')))"))) <= own


def test_kernel_cannot_see_run_lock_the_course_or_any_copy_of_the_solutions(two_kernels, tmp_path):
    (a, _), _ = two_kernels
    copies = []
    for base in ("/srv", "/opt"):
        copy = Path(base) / f"course-backup-{os.getpid()}"
        copy.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOLUTIONS / f"{LESSON}.ipynb", copy / f"{LESSON}.ipynb")
        copies.append(copy / f"{LESSON}.ipynb")
    lock_note = Path("/run/lock") / f"note-{os.getpid()}"
    try:
        lock_note.parent.mkdir(parents=True, exist_ok=True)
        lock_note.write_text("a note left by the host")
        seen = _probe(a, [lock_note, "/run/lock", "/var/lock", SOLUTIONS, SOLUTIONS / f"{LESSON}.ipynb",
                          REPO / ".git", REPO / "README.md", tmp_path, Path.home() / ".bashrc", *copies])
    finally:
        lock_note.unlink()
        for copy in copies:
            shutil.rmtree(copy.parent)
    assert set(seen.values()) <= {"missing", "denied"}, seen
    # and nothing the kernel can write outlives it: the only writable places are tmpfs
    mounts = [line.split() for line in a.run("print(open('/proc/self/mounts').read())").splitlines() if line]
    writable = {m[1]: m[2] for m in mounts if m[3].startswith("rw") and not m[1].startswith(("/proc", "/dev/"))}
    assert set(writable.values()) == {"tmpfs"}, writable


def test_kernel_has_no_network(two_kernels):
    (a, _), _ = two_kernels
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        out = a.run(f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                    "    print('CONNECTED')\nexcept OSError as e:\n    print('REFUSED', e)\n"
                    "print([name for _, name in socket.if_nameindex()])")
    assert "REFUSED" in out and "CONNECTED" not in out, out
    assert "['lo']" in out, out  # loopback only, the sandbox's own


def test_kernel_sees_only_its_own_processes(two_kernels):
    (a, b), _ = two_kernels
    b_pid = b.run("import os; print(os.getpid())").strip()
    out = a.run("import os\nprint([open(f'/proc/{p}/cmdline').read().split(chr(0))[:2] "
                "for p in os.listdir('/proc') if p.isdigit()])")
    assert "pytest" not in out and "sandbox.py" not in out, out
    assert len(eval(out)) <= 3, out  # bubblewrap's init, the kernel, this listing's parent process
    assert b_pid == "2"  # B too is alone in its PID namespace


ORPHAN = """
import subprocess, sys
# a server started through an intermediate shell that exits at once: orphaned, no child of the kernel
subprocess.run(['sh', '-c', sys.executable + ' -c "import time; time.sleep(600)" >/dev/null 2>&1 &'])
import os, time
time.sleep(0.5)
print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getpid())
"""
REFUSED = """
import course_utils.refusals as c
from course_utils.checks import ForbiddenCall
from course_utils.processes import processes_started
try:
    with c.forbidden_in_every_thread('torch.nn.functional.scaled_dot_product_attention'):
        print('allowed')
except ForbiddenCall as e:
    print('refused:', e)
with processes_started() as started:
    pass
print(started)
"""


def test_an_orphaned_process_in_the_kernels_namespace_is_refused_during_a_forbidding_test(settings, tmp_path):
    """A second interpreter orphaned by an intermediate that exits at once is no child of the kernel; in the
    sandbox's PID namespace it is still a process that could compute what a test forbids: the test's call is
    refused, and a memory measurement notes it."""
    kernel = Kernel(settings, tmp_path)
    try:
        listed = kernel.run(ORPHAN)
        assert len(eval(listed.split("] ")[0] + "]")) == 3, listed  # init, the kernel, the orphan
        out = kernel.run(REFUSED)
        assert "refused: " in out and "still running" in out, out
        assert "['running']" in out, out
    finally:
        kernel.close()


def test_the_kernels_process_clock_steps_finely(two_kernels):
    # a CPU rlimit would make Linux read the process clock per tick (4 ms steps here): the course's
    # timer then repeats every call until the ticks average out, and graded notebooks ran slower
    (a, _), _ = two_kernels
    out = a.run("import resource\nfrom course_utils.timing import process_clock_step\n"
                "print(resource.getrlimit(resource.RLIMIT_CPU)[0] == resource.RLIM_INFINITY, process_clock_step())")
    unlimited, step = out.split()
    assert unlimited == "True" and float(step) < 1e-3, out


def test_a_cpu_rlimit_only_where_nothing_else_ends_what_the_kernel_leaves():
    settings = {**sandbox.DEFAULTS, "cpu_s": 100}
    cpu = {(cgroup, pid_namespace): dict(policy.rlimits(settings, cgroup, pid_namespace)).get("RLIMIT_CPU")
           for cgroup in (False, True) for pid_namespace in (False, True)}
    assert cpu == {(False, False): 100, (False, True): None, (True, False): None, (True, True): None}


def test_a_fork_bomb_is_capped_per_kernel_and_the_other_kernel_still_forks(settings, tmp_path):
    small = {**settings, "nproc": 64}
    bomber, other = Kernel(small, tmp_path), Kernel(small, tmp_path)
    try:
        bomb = bomber.run(
            "import os, time\nkids = 0\nfor _ in range(500):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n"
            "    kids += 1\nprint(kids)")
        forks = other.run("import subprocess\nprint(sum(subprocess.run(['true']).returncode == 0 for _ in range(20)))")
    finally:
        bomber.close()
        other.close()
    assert 0 < int(bomb) < 64, bomb
    assert forks.strip() == "20", forks


def test_resident_memory_is_capped_per_kernel(settings, tmp_path):
    if not settings["cgroup"]:
        pytest.skip("no memory cgroup here: memory is capped as address space only")
    kernel = Kernel({**settings, "memory_mb": 600}, tmp_path)
    try:  # three children of 300 MB each: each under any address-space cap, together over 600 MB
        out = kernel.run(
            "import subprocess, sys\ncode = 'b = bytearray(300 << 20); b[::4096] = bytes(len(b[::4096])); "
            "import time; time.sleep(3); print(\"held\")'\n"
            "procs = [subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE) for _ in range(3)]\n"
            "print([p.wait() for p in procs])")
        codes = json.loads(out.strip().splitlines()[-1])
    finally:
        kernel.close()
    assert -9 in codes, codes  # the cgroup's OOM killer stopped at least one


def test_writable_places_are_small_and_private(settings, tmp_path):
    kernel = Kernel({**settings, "tmp_mb": 64, "fsize_mb": 512}, tmp_path)
    runtime = os.path.dirname(kernel.km.connection_file)
    try:
        out = kernel.run(
            "import errno, os\nfor where in ['/tmp/fill', 'fill', '/dev/shm/fill', " + repr(runtime + "/fill") + "]:\n"
            "    n = 0\n    try:\n        with open(where, 'wb') as f:\n"
            "            for _ in range(1024):\n                f.write(bytes(1 << 20)); f.flush(); n += 1\n"
            "    except OSError as e:\n        print(where, n, errno.errorcode[e.errno])\n")
    finally:
        kernel.close()
    full = {line.split()[0]: (int(line.split()[1]), line.split()[2]) for line in out.splitlines()}
    assert full["/tmp/fill"][0] <= 64 and full["fill"][0] <= 16 and full["/dev/shm/fill"][0] <= 16, full
    assert full[runtime + "/fill"][0] <= 1, full
    assert {why for _, why in full.values()} == {"ENOSPC"}, full
    assert not os.path.exists(runtime) and not (tmp_path / "fill").exists()


def test_a_missing_bubblewrap_is_named_in_a_warning(monkeypatch, tmp_path):
    """Without bwrap the kernel still starts, with its limits, and the warning says what no longer holds."""
    monkeypatch.setattr(policy, "bwrap_path", lambda: None)
    found, warnings = sandbox.probe(sandbox_settings(tmp_path, Limits()))
    assert found["bwrap"] is False
    text = " ".join(warnings)
    assert "bubblewrap (bwrap) not found" in text and "network" in text and "file system" in text, warnings


# ---------------------------------------------------------------- nothing left behind by a killed worker

WORKER = """
import asyncio, json, os, sys, time
from autograder import sandbox
loop = asyncio.new_event_loop()
km = sandbox.SandboxKernelManager(kernel_name="python3")
km.sandbox = json.loads(sys.argv[1])
loop.run_until_complete(km.start_kernel(cwd=sys.argv[2]))
kc = km.client()
kc.start_channels()
loop.run_until_complete(kc.wait_for_ready(timeout=120))
print(json.dumps({"launcher": km.provisioner.pid, "runtime": os.path.dirname(km.connection_file)}), flush=True)
time.sleep(600)
"""


def _leftovers(launcher, runtime):
    """What of one kernel's launcher is still there: its runtime mount and folder, its cgroups, itself."""
    left = [f"mount {point}" for point, _, _ in sandbox.mounts() if point == runtime]
    left += [f"folder {runtime}"] if os.path.exists(runtime) else []
    left += [f"cgroup {d}" for d in sandbox.Cgroups.existing(str(launcher)).dirs if os.path.exists(d)]
    left += [f"launcher {launcher}"] if sandbox.alive(launcher) else []
    return left


@pytest.mark.parametrize("kill", ["worker and launchers", "worker only"])
def test_a_worker_killed_past_the_hard_limit_leaves_no_mount_no_cgroup_and_no_folder(settings, tmp_path, kill):
    """As grading's _Running.kill does past the hard limit: SIGKILL to the worker's process group and to each
    kernel launcher's; or the worker alone (its launchers die with it, by their parent-death signal)."""
    import signal
    import time
    worker = subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(settings), str(tmp_path)], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        started = json.loads(worker.stdout.readline())
    except ValueError:
        worker.kill()
        raise
    launcher, runtime = started["launcher"], started["runtime"]
    assert f"mount {runtime}" in _leftovers(launcher, runtime)  # there while the kernel runs
    if settings["cgroup"]:
        assert any(item.startswith("cgroup ") for item in _leftovers(launcher, runtime))
    os.killpg(worker.pid, signal.SIGKILL)
    if kill == "worker and launchers":
        os.killpg(launcher, signal.SIGKILL)
    worker.wait()
    deadline = time.monotonic() + 20
    while _leftovers(launcher, runtime) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _leftovers(launcher, runtime) == []


def test_sweep_removes_what_a_killed_launcher_and_its_janitor_left(tmp_path):
    """probe() sweeps before grading: a runtime tmpfs and cgroups named after a launcher that no longer runs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs and making cgroups needs root")
    dead = subprocess.Popen(["true"])
    dead.wait()
    runtime = tmp_path / "ag-left"
    runtime.mkdir()
    assert sandbox.libc.mount(f"autograder-{dead.pid}".encode(), str(runtime).encode(), b"tmpfs", 0, b"size=1m") == 0
    try:
        groups = sandbox.Cgroups(str(dead.pid), 100, 10).dirs if sandbox.cgroup_bases() else []
    except OSError:
        groups = []
    alive_runtime = tmp_path / "ag-running"  # a launcher still running is left alone (a stand-in for one)
    alive_runtime.mkdir()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "sandbox.py"])
    sandbox.libc.mount(f"autograder-{running.pid}".encode(), str(alive_runtime).encode(), b"tmpfs", 0, b"size=1m")
    try:
        removed = sandbox.sweep()
        assert os.path.ismount(alive_runtime)
    finally:
        sandbox.libc.umount2(str(alive_runtime).encode(), sandbox.MNT_DETACH)
        running.kill()
        running.wait()
    assert f"runtime tmpfs {runtime}" in removed and not os.path.ismount(runtime)
    assert all(not os.path.exists(d) for d in groups) and all(f"cgroup {d}" in removed for d in groups)



def test_sweep_removes_the_folders_of_probes_whose_grader_was_killed_and_follows_no_link(tmp_path, monkeypatch):
    """A grader killed during its probe leaves tempfile's folder behind; the next probe's sweep removes it, by the
    grader's pid in its name. A running grader's folder, a link and a folder of another name are left alone."""
    import tempfile

    from autograder.sandbox.janitor import PROBE_PREFIX
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f"{PROBE_PREFIX}{dead.pid}-k1ll3d"
    (left / "rt").mkdir(parents=True)
    (left / "cwd" / "notes.txt").parent.mkdir()
    (left / "cwd" / "notes.txt").write_text("x")
    running = tmp_path / f"{PROBE_PREFIX}{os.getpid()}-runn1ng"
    (running / "rt").mkdir(parents=True)
    kept = tmp_path / "elsewhere"
    kept.mkdir()
    (kept / "precious.txt").write_text("keep me")
    link = tmp_path / f"{PROBE_PREFIX}{dead.pid}-l1nk"
    link.symlink_to(kept, target_is_directory=True)
    other = tmp_path / "ag-probe-n0pid"
    other.mkdir()
    removed = sandbox.sweep()
    assert f"probe folder {left}" in removed and not left.exists()
    assert running.is_dir() and other.is_dir() and link.is_symlink() and (kept / "precious.txt").read_text() == "keep me"


# ---------------------------------------------------------------- one hostile kernel beside a victim

BOMB = """
import os, time
start = time.time()
while time.time() - start < 40:
    try:
        pid = os.fork()
    except OSError:
        time.sleep(0.5)
        continue
    if pid == 0:
        time.sleep(40)
        os._exit(0)
"""
HOSTILE = r"""
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", """ + repr(BOMB) + r"""])
_hog = "b = []\nwhile True:\n    b.append(bytearray(64 << 20)); b[-1][::4096] = bytes(len(b[-1][::4096]))"
_hogs = [subprocess.Popen([sys.executable, "-c", _hog]) for _ in range(3)]
_filled = 0
for _where in ("/tmp", ".", "/dev/shm"):
    try:
        with open(os.path.join(_where, "filler"), "wb") as _f:
            while True:
                _f.write(bytes(1 << 20)); _filled += 1
    except OSError:
        pass
time.sleep(12)
"""


def _course_with(released_course, root, students):
    course = root / "course"
    shutil.copytree(released_course, course)
    for student, nb in students.items():
        submit(course, tiny.LESSON, student, nb)
    return course


def _grade(course, jobs):
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", tiny.LESSON, "--course", str(course),
                          "--jobs", str(jobs), "--memory-mb", "1500", "--nproc", "256"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    reports = {p.stem: json.loads(p.read_text()) for p in (course / "reports" / tiny.LESSON).glob("*.json")}
    return reports, run.stdout


def test_a_hostile_kernel_leaves_the_victim_beside_it_with_its_grade(settings, tiny_course, tmp_path):
    released_course = tiny_course  # the small lesson: the victim is graded while the hostile kernel runs
    blank = load(released_course / "release" / tiny.LESSON / f"{tiny.LESSON}.ipynb")
    victim = fill_solutions(blank, tiny.lesson())
    alone, _ = _grade(_course_with(released_course, tmp_path / "alone", {"victim": victim}), jobs=1)
    hostile = nbformat.reads(nbformat.writes(victim), as_version=4)
    first_code = next(i for i, c in enumerate(hostile.cells) if c.cell_type == "code" and c.get("id") != "colab-setup")
    hostile.cells.insert(first_code + 1, nbformat.v4.new_code_cell(HOSTILE))
    beside, log = _grade(_course_with(released_course, tmp_path / "beside", {"a_hostile": hostile, "victim": victim}),
                         jobs=2)
    assert (beside["victim"]["score"], beside["victim"]["max_score"]) == (alone["victim"]["score"],
                                                                          alone["victim"]["max_score"]), log
    assert alone["victim"]["score"] == alone["victim"]["max_score"], alone
    assert beside["victim"]["flags"] == alone["victim"]["flags"] == [], log
    # the two were graded at the same time (--jobs 2 starts both at once; the hostile one sleeps 12 s
    # after starting its children). Its own grade is whatever its kernel could still do: a fork bomb
    # in its cgroup can leave it unable to start a thread, which nbgrader reports as a failure.
    assert beside["a_hostile"]["seconds"] > 12, beside["a_hostile"]


# ---------------------------------------------------------------- a kernel hang is the grader's fault

@pytest.mark.parametrize("hangs, success", [(0, True), (1, True), (2, False)])
def test_a_hang_is_graded_again_once_and_never_scored_as_the_students(monkeypatch, tmp_path, hangs, success):
    from autograder import job
    from autograder.run import worker
    events = job.JobFolder(tmp_path).events
    monkeypatch.setenv(job.EVENTS_ENV, str(events))
    runs = []

    def fake_work(submission):
        runs.append(submission)
        job.event("timeout", "cell 3 timed out: no reply")
        if len(runs) <= hangs:
            job.event(job.HANG, "cell 3 never started: the kernel sat idle and no reply came")
        return {"success": True, "error": "", "log": ""}

    monkeypatch.setattr(worker, "work", fake_work)
    outcome = worker.work_retrying_a_hang({"student": "s"})
    assert len(runs) == min(hangs, 1) + 1 and outcome["success"] is success
    if not success:
        assert "the grader's fault, not the student's" in outcome["error"] and "cell 3" in outcome["error"]
    if hangs:
        assert (tmp_path / "events-hung.txt").exists()
        first = job.read_events(events)[0]
        assert first.kind == job.HANG and first.text.startswith("graded again in a fresh kernel")


DROP_NEXT_REQUEST = """_k = get_ipython().kernel
_orig = _k.shell_handlers["execute_request"]
def _drop(*a, **kw):
    _k.shell_handlers["execute_request"] = _orig
_k.shell_handlers["execute_request"] = _drop
"""


def test_tests_run_a_hung_notebook_again_and_count_it_but_not_a_slow_cell(monkeypatch):
    """nbtools.execute: a cell the kernel never started (a request dropped, as in ipykernel issue 1554)
    is a hang: run again, counted, reported; a cell that runs past its timeout is not retried."""
    from tests import nbtools
    monkeypatch.setattr(nbtools, "HANGS", [])
    hung = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(DROP_NEXT_REQUEST),
                                           nbformat.v4.new_code_cell("1 + 1")])
    with pytest.warns(UserWarning, match="cell 1 never started"), pytest.raises(Exception, match="timed out"):
        nbtools.execute(hung, timeout=8)
    assert nbtools.HANGS == ["cell 1 never started"] * 2
    slow = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(60)")])
    with pytest.raises(Exception, match="timed out"):
        nbtools.execute(slow, timeout=3)
    assert len(nbtools.HANGS) == 2
