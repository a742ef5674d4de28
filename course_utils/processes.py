"""Processes: while a test forbids an operator, no process may start and none may be running (a process is out of
the dispatcher's reach); while the grader measures a call, every process started is noted (processes_started).
An audit hook (which Python never removes) sees each start; /proc tells which children are alive."""
import contextlib
import sys

from .ambient import AMBIENT
from .checks import refusal


_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec",
                   "os.spawn", "os.startfile", "pty.spawn"}
_PROCESS_GUARD = []


def install_process_guard():
    if _PROCESS_GUARD:
        return

    def on_a_new_process(event, args):
        if event not in _PROCESS_EVENTS:
            return
        for log in AMBIENT.process_logs:
            log.append(event)
        if AMBIENT.no_new_processes:
            raise refusal(AMBIENT.no_new_processes[-1], f"no process may start while a test forbids an operator ({event})")

    sys.addaudithook(on_a_new_process)
    _PROCESS_GUARD.append(on_a_new_process)


@contextlib.contextmanager
def processes_started():
    """Yields a list that gets the audit event of each process this process starts while the block runs
    ("subprocess.Popen", "os.fork", ...), and, as the block begins, "running" if a child is alive already."""
    install_process_guard()
    log = ["running"] if child_processes() else []
    AMBIENT.process_logs.append(log)
    try:
        yield log
    finally:
        AMBIENT.process_logs.remove(log)


def child_processes():
    """The ids of the living processes that could compute for this one (Linux; an empty list where /proc cannot
    tell): in the grading sandbox's PID namespace, every process in it but this one and its ancestors, so a
    process orphaned by an intermediate that exited at once counts too; elsewhere this process's descendants."""
    import os
    try:  # the grading sandbox: a PID namespace whose init is bubblewrap's (another uid's process: not the student's)
        with open("/proc/1/cmdline", "rb") as f:
            own_namespace = os.path.basename(f.read().split(b"\0")[0]) == b"bwrap"
    except OSError:
        own_namespace = False
    if own_namespace:
        ancestors, pid = set(), os.getpid()
        while pid > 0 and pid not in ancestors:
            ancestors.add(pid)
            pid = _parent(pid)
        return [pid for pid in _pids() if pid not in ancestors and _alive(pid)]
    found, todo = [], [os.getpid()]
    while todo:
        parent = todo.pop()
        for thread in _listdir(f"/proc/{parent}/task"):
            try:
                with open(f"/proc/{parent}/task/{thread}/children") as f:
                    children = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                continue
            new = [child for child in children if child not in found]
            found += new
            todo += new
    return [pid for pid in found if _alive(pid)]


def _listdir(path):
    import os
    try:
        return os.listdir(path)
    except OSError:
        return []


def _pids():
    return [int(p) for p in _listdir("/proc") if p.isdigit()]


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has finished
    except (OSError, IndexError):
        return False
