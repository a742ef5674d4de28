"""Every rule of what a sandboxed kernel sees: the allow-list file system (bubblewrap's arguments), the
environment it gets, its resource limits, and the settings a grading run starts it with.

Standard library only at import (the launcher imports it as a plain module, see launcher.py);
`sandbox_settings` reads the course's paths when the grader calls it.
"""
import os
import shutil
import sys
from pathlib import Path

if __package__:
    from .limits import Limits
else:  # the launcher's plain import (see launcher.py)
    from limits import Limits


KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "NBGRADER_EXECUTION", "MPLBACKEND",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "COURSE_DEVICE")


KEEP_ENV_PREFIXES = ("LC_", "PYDEVD_")  # not COURSE_: the instructor's COURSE_FAST=0 must not reach a graded kernel


SUBMISSION = "/run/submission"  # read-only view of the submission folder, copied into the working directory


FONT_CACHE = "/run/font-cache"  # read-only view of the grader's matplotlib cache


DEFAULTS = dict(
    bwrap=True,             # start the kernel through bubblewrap (if found)
    separate_user=True,     # as root: each kernel gets its own uid
    cgroup=True,            # as root: a memory + pids cgroup per kernel
    uid_base=2_000_000_000,  # kernel uid = uid_base + launcher pid (no account needs to exist)
    read_only=[],           # paths bound read-only at the same place (Python, site-packages, course_utils)
    python_path=[],         # folders put first on the kernel's PYTHONPATH (the one holding course_utils)
    **Limits().for_the_sandbox(),  # memory_mb, nproc, fsize_mb, cpu_s: declared in limits.py
    nofile=1024,            # RLIMIT_NOFILE
    tmp_mb=256,             # size of the private /tmp; the working directory and /dev/shm get a quarter each
    font_cache="",          # the grader's matplotlib cache: its font list seeds the kernel's (saves a rebuild)
)


ETC = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
       "/etc/nsswitch.conf", "/etc/fonts", "/etc/mime.types"]


def bwrap_path():
    return shutil.which("bwrap")


def sandbox_settings(course_root, limits):
    """What the kernel may read (an allow-list: the Python installation, course_utils) and its limits.

    must_not_see only feeds the probe's check that the sandbox hides them: nothing outside
    read_only (and the kernel's own submission and scratch space) is visible anyway.
    """
    from ..course import REPO, SOLUTIONS  # the grader's side only: the launcher never calls this
    read_only, python_path = python_paths()
    must_not_see = [Path(course_root).resolve(), SOLUTIONS, REPO / ".git", Path.home() / ".ssh"]
    font_cache = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib")
    return dict(read_only=read_only, python_path=python_path, must_not_see=[str(p) for p in must_not_see], font_cache=font_cache,
                **limits.for_the_sandbox())


def python_paths():
    """(read-only paths, PYTHONPATH) of a sandboxed Python: the installation, its site-packages, course_utils."""
    import importlib.util
    course_utils = Path(importlib.util.find_spec("course_utils").origin).resolve().parent
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    inside = lambda p: any(p == q or p.startswith(q + os.sep) for q in prefixes)  # noqa: E731
    paths = {os.path.realpath(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    return sorted(prefixes | {p for p in paths if not inside(p)} | {str(course_utils)}), [str(course_utils.parent)]


def system_binds():
    """bubblewrap's arguments for the system's programs and libraries (/usr, /lib...), read-only."""
    args = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def etc_binds():
    """bubblewrap's arguments for the few /etc files Python needs, read-only where they exist."""
    return [a for path in ETC for a in ("--ro-bind-try", path, path)]


def _ancestors(path):
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def bwrap_args(settings, runtime, cwd, info_fd, as_root):
    """bubblewrap's arguments: namespaces, then the allow-list file system, in mount order."""
    tmp = settings["tmp_mb"] << 20
    args = [bwrap_path(), "--die-with-parent", "--new-session", "--info-fd", str(info_fd)]
    if as_root:  # no user namespace: the stub switches to the kernel's own uid
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-drop", "ALL"] + [a for cap in ("SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "FOWNER")
                                         for a in ("--cap-add", f"CAP_{cap}")]
    else:
        args += ["--unshare-all"]
    args += system_binds() + ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(tmp), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(tmp // 4), "--tmpfs", "/dev/shm"]
    made = {"/", "/usr", "/tmp", "/dev", "/proc", "/etc", "/run"}
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/run"]
    args += etc_binds()
    binds = [(p, p, "--ro-bind") for p in settings["read_only"] if os.path.exists(p)]
    binds += [(cwd, SUBMISSION, "--ro-bind"), (runtime, runtime, "--bind")]
    if settings["font_cache"] and os.path.isdir(settings["font_cache"]):
        binds.append((settings["font_cache"], FONT_CACHE, "--ro-bind"))
    for src, dest, how in binds:
        for parent in _ancestors(dest):
            if parent not in made and not os.path.islink(parent):
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        args += [how, src, dest]
        made.add(dest)
    for parent in _ancestors(cwd):
        if parent not in made:
            args += ["--perms", "0755", "--dir", parent]
            made.add(parent)
    args += ["--perms", "0700" if as_root else "0755", "--size", str(tmp // 4), "--tmpfs", cwd, "--chdir", cwd]
    args += ["--ro-bind", os.path.join(runtime, "passwd"), "/etc/passwd",
             "--ro-bind", os.path.join(runtime, "group"), "/etc/group"]
    return args


def rlimits(settings, cgroup, pid_namespace):
    """rlimits of the kernel; with a memory cgroup, resident memory is capped there, not address space.

    RLIMIT_CPU only where nothing else ends a process the kernel leaves behind (no cgroup, whose removal
    kills what is in it, and no PID namespace, which dies with bubblewrap's init): a CPU rlimit makes
    Linux read the process clock (`time.process_time`) from a per-tick account, so it steps by 4 ms
    instead of microseconds, and every notebook that times code on the process clock ran slower.
    """
    mb = 1 << 20
    limits = [("RLIMIT_AS", 0 if cgroup else settings["memory_mb"] * mb), ("RLIMIT_NPROC", settings["nproc"]),
              ("RLIMIT_FSIZE", settings["fsize_mb"] * mb),
              ("RLIMIT_CPU", 0 if cgroup or pid_namespace else settings["cpu_s"]),
              ("RLIMIT_NOFILE", settings["nofile"]), ("RLIMIT_CORE", 0)]
    return [(n, v) for n, v in limits if v or n == "RLIMIT_CORE"]


def kernel_env(home, python_path=()):
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    # the grader's own course_utils, whatever an editable install's finder says (it may name another clone)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [env.get("PYTHONPATH")])])
    env.update(HOME=home, USER="student", LOGNAME="student", TMPDIR="/tmp", IPYTHONDIR=f"{home}/.ipython",
               MPLCONFIGDIR=f"{home}/.matplotlib", JUPYTER_RUNTIME_DIR=f"{home}/.jupyter",
               JUPYTER_DATA_DIR=f"{home}/.jupyter", XDG_CACHE_HOME=f"{home}/.cache",
               # the kernel's parent is bubblewrap's init (pid 1): 1 tells ipykernel not to poll it
               JPY_PARENT_PID="1",
               # glibc's malloc with fixed thresholds (not raised as big blocks are freed): a block of 4 MiB or more
               # is mapped for itself and unmapped when freed, and the heap's free top past 8 MiB is returned, so a
               # call's large temporaries are new memory its cgroup's peak sees, not pages an earlier call left
               # resident (KernelCgroup.added counts those as touched); lesson 07's grading ran no slower
               MALLOC_MMAP_THRESHOLD_=str(4 << 20), MALLOC_TRIM_THRESHOLD_=str(8 << 20),
               COURSE_FAST="1")  # grading runs in fast mode, whatever the instructor's shell says
    return env
