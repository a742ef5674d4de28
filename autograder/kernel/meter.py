"""Lesson 11's kernels, run and counted in a process the grader starts: never in the student's kernel.

A test that counts a Triton kernel's work (`count_work()` around a call to the student's launcher) cannot
trust a count made where the student's code runs: the interpreter's builder, the counter's blocks and the
answer's encoder are all objects that code can reach. So while such a call runs in the student's kernel,
every kernel launch there is a question to the grader (in_kernel/launch.py): the launched
@triton.jit function's source, the sources of the jitted functions it calls, the constants it reads, the grid,
and its arguments (tensors as their storages' bytes, with offset, size and stride). The grader hands the launch
to a `Meter`: meter_process.py run as a script, in a process of its own (through bubblewrap where there is one: no
network, a read-only file system of Python and the course's packages), whose counter was in place before any
kernel's source was read. It checks each source against what Triton's compiler accepts in a kernel (`check`:
an allow-list of Python's syntax, `tl.*` and `triton.language`'s modules, other jitted functions, constants and
a few built-ins, no name or attribute that starts with "_"), runs the launch in Triton's interpreter, and answers
with plain data: the work counted, the bytes of each storage the launch changed (the student's kernel copies
them back), and every value the kernel stored. The grader adds the work to the test's open count_work blocks,
and checks that what the launcher returns holds only values its kernels stored (session.Session), so a result
computed anywhere else (PyTorch, numpy, an interpreter run the grader never saw) fails.

This module is the grader's side (start the process, send a launch, read its answer as plain values).
"""
import base64
import json
import os
import shutil
import subprocess
import sys

from .meter_process import LAUNCH_SECONDS, MAX_LAUNCH_BYTES, MAX_REPLY_BYTES, Timeout, receive, send


class Meter:
    """One metering process for one graded kernel, started at its first launch; `launch(question)` runs one."""

    def __init__(self):
        self.process = None

    def launch(self, question, seconds=LAUNCH_SECONDS):
        """question: the kernel's launch ({"kernel", "sources", "globals", "grid", "args", "kwargs", "storages"}).
        Returns {"work": {field: int}, "storages": {index: bytes}, "stored", "loaded": the distinct float values
        its kernels stored and loaded, numpy float64 arrays} or
        {"refused": why} (the student's kernel: not what a kernel may be) or {"error": kind} (the kernel failed).
        Raises Timeout when the launch ran `seconds` with the CPU it needed (the student's loop), RuntimeError
        when the meter itself fails or was starved of CPU on a busy machine (the grader's problem)."""
        from ..sandbox import clock
        payload = json.dumps(question).encode()
        if len(payload) > MAX_LAUNCH_BYTES * 4 // 3 + (1 << 20):
            return {"refused": f"the launch's tensors take more than {MAX_LAUNCH_BYTES >> 20} MB"}
        if self.process is None or self.process.poll() is not None:
            self.process = _start()
        started = clock.read(self.process.pid)
        try:
            send(self.process.stdin, payload)
            reply = json.loads(receive(self.process.stdout, MAX_REPLY_BYTES, max(1.0, seconds)))
        except TimeoutError:
            starved, why = clock.starved(started, clock.read(self.process.pid))
            self.close()
            if starved:
                raise RuntimeError(f"the kernel meter was starved of CPU on a busy machine ({why})") from None
            raise Timeout(f"the kernel ran past the cell's time limit ({why})") from None
        except (OSError, ValueError, EOFError) as e:
            self.close()
            raise RuntimeError(f"the kernel meter gave no answer ({type(e).__name__}: {str(e)[:200]})") from None
        return _read_reply(reply)

    def close(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()
            self.process = None


def _read_reply(reply):
    """The meter's JSON answer as plain values; anything else is the meter's failure (RuntimeError)."""
    import dataclasses

    import numpy as np

    from course_utils.kernels import KernelWork
    if type(reply) is not dict:
        raise RuntimeError("the kernel meter's answer is not an object")
    if "refused" in reply or "error" in reply:
        key = "refused" if "refused" in reply else "error"
        return {key: str(reply[key])[:600]}
    work = reply.get("work")
    fields = {f.name for f in dataclasses.fields(KernelWork)}
    if type(work) is not dict or set(work) != fields or any(type(v) is not int or v < 0 for v in work.values()):
        raise RuntimeError("the kernel meter's work figures are malformed")
    storages = {int(k): base64.b64decode(v, validate=True) for k, v in dict(reply.get("storages", {})).items()}
    stored, loaded = (np.frombuffer(base64.b64decode(str(reply.get(key, "")), validate=True), dtype=np.float64).copy()
                      for key in ("stored", "loaded"))
    return {"work": work, "storages": storages, "stored": stored, "loaded": loaded}


def _start():
    """This file as a script, through bubblewrap where there is one (no network, Python's and the course's
    files read-only, a private /tmp), else as a plain process with the same environment."""
    from ..sandbox.policy import etc_binds, python_paths, system_binds
    read_only, python_path = python_paths()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "meter_process.py")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(python_path),
           "HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": "/tmp/triton",
           "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-s", script]
    bwrap = shutil.which("bwrap")
    if bwrap and os.environ.get("AUTOGRADER_METER_BWRAP", "1") != "0":
        args = [bwrap, "--die-with-parent", "--new-session"]
        args += (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--cap-drop", "ALL"]
                 if os.geteuid() == 0 else ["--unshare-all"])
        args += system_binds() + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"] + etc_binds()
        for path in sorted(set(read_only)):
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        args += ["--ro-bind", script, script, "--chdir", "/tmp"]
        command = args + command
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd="/tmp", start_new_session=True)


# ------------------------------------------------------------------ the meter's side (this file as a script)
