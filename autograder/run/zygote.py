"""Warm worker processes: each submission is graded in a process forked from one that has nbgrader imported.

A fresh `python -m autograder.run.worker JOB` spends about 1.7 s importing nbformat, jsonschema,
nbgrader and IPython before it grades anything; a class of 200 notebooks pays that 200 times. A
zygote is a small single-threaded process that imports all of it once and then, for each
job the parent sends it, forks a child that runs the job: a new process (its own pid,
process group and environment, nothing of an earlier job) with the imports already done.

multiprocessing's forkserver does the same, but re-imports the caller's main script in
every child, which breaks an instructor's script that calls grade() without an
`if __name__ == "__main__":` guard, and a daemonic process (a Dask worker) may not use it.

What a zygote imports is the common part (BASE) and the modules of the lessons it grades: what their
grader-side set-up imports (verdicts.LessonTests.modules), so a small lesson that needs no torch
is not made to wait for it (about 4 CPU-s a zygote).

Protocol, one JSON object per line: the parent writes {"job", "log", "env", "target"}; the zygote
forks, answers {"pid"}, waits for the child and answers {"exit"} (the exit status, negative
for a signal). A zygote serves one job at a time; the parent keeps one per job slot (and set of
modules), idle ones are reused by the next grade() in the same process, and each exits when the parent's
end of its pipe closes. Parent-death signals chain grader -> zygote -> worker -> kernel
launcher, so a grader killed outright (SIGKILL) takes its running jobs with it (the zygote's
link only when the grader made it from its main thread: the signal follows the thread).
"""
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = "autograder.run.worker:main"  # what a worker runs: main(Path(job_file)) (job.py: the job protocol)
# What every grading worker imports (found by comparing sys.modules before and after a job): nbgrader,
# and, through jupyter_client's kernel spec lookup and nbgrader's gradebook, IPython, ipykernel and sqlite; the
# sandbox's kernel manager (the sandbox's face imports it when SandboxedExecute first names it)
BASE = ("autograder.job", "autograder.run.worker", "autograder.preprocessors", "autograder.sandbox.manager",
        "nbgrader.apps", "nbgrader.coursedir", "IPython", "IPython.core.debugger", "ipykernel.kernelspec", "sqlite3",
        "sqlalchemy.dialects.sqlite")


def preload(modules):
    """What a zygote serving lessons whose set-up imports `modules` imports before its first job (a sorted tuple).

    With torch, torch._dynamo too (about 1.5 s, once per process): PyTorch imports it at the first call of
    functions the tests make on the grader's side (nn.MultiheadAttention's forward, an optimizer's first
    parameter group) and lesson 08's set-up imports it through torch.nn.attention.bias."""
    modules = set(modules)
    if "torch" in {m.split(".")[0] for m in modules}:
        modules.add("torch._dynamo")
    return tuple(sorted(modules))


_IDLE, _LOCK = [], threading.Lock()


class Zygote:
    """The parent's handle on one zygote process."""

    def __init__(self, modules=()):
        self.modules = tuple(modules)  # what it imports besides BASE
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        # PR_SET_PDEATHSIG follows the thread that forked: only a main thread lives as long as its process
        die_with_parent = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.run.zygote", str(os.getpid() if die_with_parent else 0),
                                      *self.modules],
                                     cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True)
        self.buffer = b""

    def _line(self, block):
        """The zygote's next answer, or None when `block` is False and none is ready; {} once it died."""
        while b"\n" not in self.buffer:
            if not block and not select.select([self.proc.stdout], [], [], 0)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                return {}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self, job_file, log_path, env, target=TARGET):
        """Fork a worker for the job; returns its handle (pid, poll, wait, returncode like Popen)."""
        request = dict(job=str(job_file), log=str(log_path), env=env, target=target)
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # a dead zygote: the answer below is {}
        answer = self._line(block=True)
        return Worker(self, answer.get("pid"))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Worker:
    """One job's process, forked by a zygote; returns the zygote to the idle pool when it ends."""

    def __init__(self, zygote, pid):
        self.zygote, self.pid, self.returncode = zygote, pid or 0, None
        if pid is None:
            self._ended({})

    def _ended(self, answer):
        self.returncode = answer.get("exit", -1)
        if answer:
            with _LOCK:
                _IDLE.append(self.zygote)
        else:  # the zygote itself died: never reuse it
            self.zygote.proc.kill()
            self.zygote.proc.wait()

    def poll(self):
        if self.returncode is None:
            answer = self.zygote._line(block=False)
            if answer is not None:
                self._ended(answer)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self._ended(self.zygote._line(block=True))
        return self.returncode


def wait_any(workers, timeout):
    """Sleep until one of `workers` may have ended (its zygote answered) or `timeout` seconds pass."""
    pending = [w for w in workers if w.returncode is None]
    if any(b"\n" in w.zygote.buffer for w in pending):
        return
    if pending:
        select.select([w.zygote.proc.stdout for w in pending], [], [], timeout)
    else:
        time.sleep(timeout)


def _serves(zygote, modules):
    """True when `zygote` has imported the packages of `modules`: a lesson's own submodules (its explorer) cost its
    workers little, so one zygote serves every lesson of the course rather than one per lesson."""
    return {m.split(".")[0] for m in modules} <= {m.split(".")[0] for m in zygote.modules}


def _idle(modules):
    """An idle zygote that serves `modules`, taken from the pool (None if there is none)."""
    with _LOCK:
        _IDLE[:] = [z for z in _IDLE if z.proc.poll() is None]
        for z in _IDLE:
            if _serves(z, modules):
                _IDLE.remove(z)
                return z
    return None


def start(job_file, log_path, env, target=TARGET, modules=()):
    """Run target(Path(job_file)) in a worker forked from a warm zygote that has imported BASE and `modules`' packages, with
    `env` as its whole environment and its output in log_path; returns the worker's handle (pid, poll, wait,
    returncode)."""
    zygote = _idle(modules) or Zygote(modules)
    return zygote.start(job_file, log_path, env, target)


def warm(n, modules=()):
    """Start zygotes until n that serve `modules` are idle, so that their imports run while the parent
    does other work."""
    with _LOCK:
        _IDLE[:] = [z for z in _IDLE if z.proc.poll() is None]
        ready = sum(_serves(z, modules) for z in _IDLE)
        _IDLE.extend(Zygote(modules) for _ in range(n - ready))


def close_idle():
    """End every idle zygote and wait for it (a benchmark's next run then starts cold, as a new `grade` does)."""
    with _LOCK:
        idle, _IDLE[:] = list(_IDLE), []
    for z in idle:
        z.close()


# ---------------------------------------------------------------- the zygote process

def _die_with(parent):
    """SIGKILL this process when `parent` (a pid) dies, even if it died already."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _child(job, log, env, target, zygote):
    """In the forked child: become the worker `python -m autograder.run.worker JOB` would have been."""
    code = 1
    try:
        _die_with(zygote)  # and the kernel launcher dies with us: nothing of the job outlives the grader
        os.setpgid(0, 0)  # its own process group (the zygote sets it too): killed with its kernels
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.environ.clear()
        os.environ.update(env)
        module, function = target.split(":")
        getattr(importlib.import_module(module), function)(Path(job))
        code = 0
    except BaseException:  # noqa: BLE001: reported in the log, the exit status says it failed
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(grader, modules):
    if grader:
        _die_with(grader)
    for name in (*BASE, *modules):  # the imports every worker needs, done once
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001: a worker that needs it imports it itself (and reports what fails)
            pass
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints must not corrupt the protocol
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            answers.close()
            _child(request["job"], request["log"], request["env"], request["target"], zygote)
        try:  # as shells do: whichever runs first, the group exists before the parent hears the pid
            os.setpgid(pid, pid)
        except OSError:
            pass
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2:])
