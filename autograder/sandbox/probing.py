"""probe: which of the sandbox's guarantees hold on this machine, tried with a kernel-like command."""
import json
import os
import subprocess
import sys
import tempfile

from . import policy
from .cgroups import Cgroups
from .janitor import PROBE_PREFIX, sweep
from .launcher import launcher_cmd


PROBE = r"""
import json, os, socket, sys
def seen(p):
    try:
        return bool(os.listdir(p)) if os.path.isdir(p) else open(p, 'rb').read(1) != b''
    except OSError:
        return False
hidden = [p for p in json.loads(sys.argv[1]) if seen(p)]
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2).close()
    net = True
except OSError:
    net = False
import importlib.util, ipykernel, mmap
assert importlib.util.find_spec("course_utils"), "course_utils is not importable in the sandbox"
forgets = []  # what could clear the accessed bits of its own pages (confine.py refuses both)
try:
    open("/proc/self/clear_refs", "w").close()
    forgets.append("/proc/self/clear_refs")
except OSError:
    pass
try:
    mmap.mmap(-1, 4096).madvise(20)
    forgets.append("madvise(MADV_COLD)")
except OSError:
    pass
print(json.dumps({"uid": os.getuid(), "seen": hidden, "net": net, "forgets": forgets}))
"""


def probe(settings, timeout=120, find_bwrap=None):
    """Try the launcher once with a kernel-like command; return (settings that work, warnings).

    Drops bubblewrap, then the separate user, then the cgroups, when they fail here, and says
    so, naming each guarantee that does not hold. `find_bwrap` finds bubblewrap (None: not installed; by default
    policy.bwrap_path, read when the probe runs, so a test may replace it).
    """
    find_bwrap = find_bwrap or policy.bwrap_path
    settings = {**policy.DEFAULTS, **settings}
    hidden = [p for p in settings.get("must_not_see", []) if os.path.exists(p)]
    warnings = []
    root = os.geteuid() == 0
    sweep()  # what launchers killed in an earlier run left (their janitors normally remove it at once)
    if settings["bwrap"] and not find_bwrap():
        warnings.append("bubblewrap (bwrap) not found (apt-get install bubblewrap): the kernel sees the whole "
                        "file system (other copies of the solutions, other students' files), shares the network "
                        "(it can reach other kernels over loopback) and sees every process")
        settings["bwrap"] = False
    if not root:
        warnings.append("not running as root: every kernel runs as you, so they share one process limit "
                        "(RLIMIT_NPROC) and can read each other's files outside the sandbox; no cgroup, "
                        "so memory is capped as address space (RLIMIT_AS), not resident memory")
    elif settings["cgroup"]:
        try:
            Cgroups(f"probe-{os.getpid()}", settings["memory_mb"], settings["nproc"]).remove()
        except OSError as e:
            warnings.append(f"cannot make a memory and pids cgroup ({e}): resident memory and processes are "
                            "not capped per kernel, only address space (RLIMIT_AS) and the per-uid process limit")
            settings["cgroup"] = False
    attempts = [settings]
    if settings["bwrap"]:
        attempts.append({**settings, "bwrap": False})
    if root and settings["separate_user"]:
        attempts += [{**a, "separate_user": False} for a in list(attempts)]
    listener = __import__("socket").socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        for attempt in attempts:
            ok, out = _try(attempt, hidden, listener.getsockname()[1], timeout)
            if ok:
                break
            warnings.append(f"sandbox {attempt_name(attempt)} does not work here: {out}")
        else:
            return {**settings, "bwrap": False, "separate_user": False, "cgroup": False}, warnings
    finally:
        listener.close()
    return attempt, warnings + _what_fails(settings, attempt, out, root)


def _what_fails(asked, attempt, out, root):
    """The warnings of the attempt that worked (`out`: what its kernel-like command found) against what was asked."""
    warnings = []
    if asked["bwrap"] and not attempt["bwrap"]:
        warnings.append("bubblewrap fails here: the kernel sees the whole file system, the network and every process")
    if root and asked["separate_user"] and not attempt["separate_user"]:
        warnings.append("cannot run the kernel as its own unprivileged uid: it runs as root, shares the process "
                        "limit with the other kernels and can read or write any file it can reach")
    if out["seen"]:
        warnings.append(f"the kernel can read {', '.join(out['seen'])}")
    if out["net"] and attempt["bwrap"]:
        warnings.append("the kernel can reach the host's loopback network")
    if out.get("forgets"):
        warnings.append(f"the kernel can clear its own pages' accessed bits ({', '.join(out['forgets'])}: Landlock and "
                        "seccomp need Linux 5.13 or newer), so memory filled before a measured call and reused by it "
                        "is not seen from outside")
    return warnings


def _try(settings, hidden, port, timeout):
    with tempfile.TemporaryDirectory(prefix=f"{PROBE_PREFIX}{os.getpid()}-") as work:
        runtime, cwd = os.path.join(work, "rt"), os.path.join(work, "cwd")
        os.mkdir(runtime)
        os.mkdir(cwd)
        conn = os.path.join(runtime, "kernel.json")
        with open(conn, "w") as f:
            f.write('{"transport": "ipc"}')
        cmd = launcher_cmd(settings) + [sys.executable, "-c", PROBE, json.dumps([str(p) for p in hidden]),
                                        str(port), "-f", conn]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired:
            return False, f"no answer in {timeout} s"
    if run.returncode != 0:
        return False, (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
    return True, json.loads(run.stdout.strip().splitlines()[-1])


def attempt_name(settings):
    """In words: how the kernel is sandboxed."""
    parts = ["bubblewrap" if settings.get("bwrap") else "no bubblewrap"]
    if os.geteuid() == 0:
        parts.append("its own uid" if settings.get("separate_user") else "as root")
        parts.append("memory+pids cgroup" if settings.get("cgroup") else "no cgroup")
    else:
        parts.append("as you, no cgroup")
    return ", ".join(parts) + ", rlimits"
