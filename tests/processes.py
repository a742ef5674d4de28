"""Long-lived processes the tests start (a Jupyter server, a Dask scheduler), which must not outlive the test run.

A fixture stops what it started when the run ends normally or on Ctrl-C. What it cannot do is run when its own
process is gone: pytest-xdist kills a worker that has not finished its teardown soon enough after Ctrl-C, a CI
job's timeout kills the whole run, and a server started in the terminal's process group takes Ctrl-C as its own
(JupyterLab's server then exits without stopping its kernels, which run on in sessions of their own). So such a
process is started by `dies_with_this_process`: in a session of its own (the terminal's Ctrl-C reaches the test
run, whose teardown stops it), and told by Linux to terminate when the thread that started it dies
(PR_SET_PDEATHSIG), which a Jupyter server takes as a request to stop its kernels and exit. Start such a
process from the main thread (pytest's fixtures run there, under pytest-xdist too): it gets SIGTERM when the
starting thread ends.

`processes_with(marker)` finds what is left of a run, by a variable in every process's environment
(tests/test_interrupted_run.py).
"""
import os
import signal
import sys
from pathlib import Path

# run by the new process's own interpreter before it becomes the command: the parent's death is its SIGTERM from
# now on, and a parent already gone (between fork and prctl) means exit at once; then exec (PDEATHSIG survives it)
_DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(143)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def dies_with_this_process(argv):
    """Popen's arguments that run `argv` in a session of its own, terminated (SIGTERM) when this thread dies.

    Linux only: elsewhere `argv` unchanged, apart from the session (the teardown stops it as before)."""
    if not sys.platform.startswith("linux"):
        return dict(args=list(argv), start_new_session=True)
    return dict(args=[sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv], start_new_session=True)


def processes_with(marker):
    """{pid: command line} of the running processes (not zombies) whose environment holds `marker` ("NAME=value")."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() not in (proc / "environ").read_bytes():
                continue
            if b"State:\tZ" in (proc / "status").read_bytes():
                continue
            found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            pass
    return found

