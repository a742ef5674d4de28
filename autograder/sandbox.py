"""Run a student's kernel where it cannot reach the grader's files.

Run as a script, this file is a launcher: `python sandbox.py SETTINGS_JSON -- KERNEL_CMD...`.
It starts the kernel command (ipykernel) after, in this order and as far as Linux allows:

1. new mount and PID namespaces (needs root): a fresh tmpfs on /tmp, /var/tmp and
   /dev/shm, the hidden paths (course directory, solutions/, .git, the grader's home)
   covered by empty read-only tmpfs, and the Python installation mounted back if it
   lived under one of them; the kernel is PID 1 of its namespace, so every process
   it starts dies with it;
2. resource limits: address space, processes, file size, CPU seconds, open files;
3. an unprivileged user (default `nobody`, needs root), no new privileges, and a
   parent-death signal so the kernel never outlives the grader;
4. a working directory and HOME in the fresh /tmp, and an environment without the
   grader's variables.

It uses only the standard library: it runs before anything is imported in the kernel.
The rest of the course imports SandboxKernelManager (which prepends this launcher to the
kernel command) and `probe` (which tries the launcher once and drops what does not work).
"""
import ctypes
import json
import os
import pwd
import resource
import signal
import subprocess
import sys

CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "NBGRADER_EXECUTION", "MPLBACKEND",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV")
KEEP_ENV_PREFIXES = ("LC_", "COURSE_", "JPY_", "PYDEVD_")

DEFAULTS = dict(
    user="nobody",          # unprivileged user for the kernel (only when started as root)
    namespaces=True,        # mount + PID namespaces (only as root)
    hide=[],                # paths the kernel must not see
    expose=[],              # paths to mount back inside hidden ones (the Python installation)
    memory_mb=4096,         # RLIMIT_AS of the kernel
    nproc=512,              # RLIMIT_NPROC (threads count): per user
    fsize_mb=64,            # RLIMIT_FSIZE: largest file the kernel may write
    cpu_s=600,              # RLIMIT_CPU of each kernel process
    nofile=1024,            # RLIMIT_NOFILE
    tmp_mb=256,             # size of the kernel's private /tmp
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype=None, flags=0, data=None):
    enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _tmpfs(target, mb, mode="1777"):
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={mb}m,mode={mode}")


def _cover(paths):
    for path in sorted(paths, key=len):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)


def _hide_and_expose(settings):
    """Runs as root inside the new mount namespace."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    hide = [os.path.realpath(p) for p in settings["hide"] if os.path.exists(p)]
    expose = [os.path.realpath(p) for p in settings["expose"] if os.path.isdir(p)]
    inside = lambda p, dirs: any(p == d or p.startswith(d + "/") for d in dirs)  # noqa: E731
    # what must come back: paths inside hidden ones, and paths under /tmp (a repository
    # cloned there), which the fresh tmpfs on /tmp would otherwise hide
    expose = [p for p in expose if inside(p, hide + ["/tmp"])]
    expose = [p for p in expose if not inside(p, [e for e in expose if e != p])]  # outermost only
    # hold each one by a file descriptor, so it can still be bind-mounted once /tmp is replaced
    handles = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in expose]
    _tmpfs("/tmp", settings["tmp_mb"])
    staged = []
    for i, (handle, path) in enumerate(zip(handles, expose)):
        stage = f"/tmp/.expose{i}"
        os.mkdir(stage)
        _mount(f"/proc/self/fd/{handle}", stage, None, MS_BIND | MS_REC)
        os.close(handle)
        staged.append((stage, path))
    for extra in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(extra):
            _tmpfs(extra, 64)
    outer = [h for h in hide if not inside(h, expose)]
    _cover(outer)
    for stage, path in staged:
        os.makedirs(path, exist_ok=True)
        _mount(stage, path, None, MS_MOVE)
        os.rmdir(stage)
    _cover([h for h in hide if h not in outer])  # hidden paths inside what came back (solutions/ in the repo)
    for path in sorted(hide, key=len):  # now read-only: the kernel can add nothing there
        if os.path.isdir(path):
            _mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _limit(settings):
    mb = 1024 * 1024
    for name, value in [("RLIMIT_AS", settings["memory_mb"] * mb), ("RLIMIT_NPROC", settings["nproc"]),
                        ("RLIMIT_FSIZE", settings["fsize_mb"] * mb), ("RLIMIT_CPU", settings["cpu_s"]),
                        ("RLIMIT_NOFILE", settings["nofile"]), ("RLIMIT_CORE", 0)]:
        if value:
            resource.setrlimit(getattr(resource, name), (value, value))


def _kernel_env(home):
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    env.update(HOME=home, TMPDIR="/tmp", IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib",
               JUPYTER_RUNTIME_DIR=home, JUPYTER_DATA_DIR=f"{home}/.jupyter", XDG_CACHE_HOME=f"{home}/.cache")
    return env


def _start_kernel(settings, cmd, connection):
    """Runs in the process that becomes the kernel (PID 1 of the namespace when there is one)."""
    root = os.geteuid() == 0
    if settings["namespaces"] and root:
        _hide_and_expose(settings)
    home = f"/tmp/kernel-{os.getpid()}" if not (settings["namespaces"] and root) else "/tmp/kernel"
    os.makedirs(home, mode=0o700, exist_ok=True)
    connection_file = os.path.join(home, "connection.json")
    with open(connection_file, "w") as f:
        f.write(connection)
    cmd = [connection_file if a == "{connection_file}" else a for a in cmd]
    _limit(settings)
    if root and settings["user"]:
        user = pwd.getpwnam(settings["user"])
        for path in (home, connection_file):
            os.chown(path, user.pw_uid, user.pw_gid)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl no_new_privs")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl pdeathsig")
    os.chdir(home)
    os.execve(cmd[0], cmd, _kernel_env(home))


def launch(settings, cmd):
    """Start `cmd` sandboxed; `-f FILE` in it is the connection file, read here while still privileged."""
    settings = {**DEFAULTS, **settings}
    cmd = list(cmd)
    i = cmd.index("-f") + 1
    with open(cmd[i]) as f:
        connection = f.read()
    cmd[i] = "{connection_file}"
    if not (settings["namespaces"] and os.geteuid() == 0):
        _start_kernel(settings, cmd, connection)
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare")
    child = os.fork()  # the child is PID 1 of the new PID namespace
    if child == 0:
        try:
            _start_kernel(settings, cmd, connection)
        except BaseException as e:  # noqa: BLE001: report, then die without running the parent's code
            print(f"autograder sandbox: cannot start the kernel: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    # the launcher waits as root outside the namespace; jupyter signals the whole process group,
    # so the kernel receives SIGINT itself, and SIGKILL of the launcher kills the kernel (pdeathsig)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl pdeathsig")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
    _, status = os.waitpid(child, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def launcher_cmd(settings):
    """The prefix that runs a command through this launcher."""
    return [sys.executable, os.path.abspath(__file__), json.dumps(settings), "--"]


def probe(settings, timeout=60):
    """Try the launcher once with a kernel-like command; return (settings that work, warnings).

    Drops namespaces, then the separate user, when they fail here, and says so.
    """
    warnings = []
    settings = {**DEFAULTS, **settings}
    if os.geteuid() != 0:
        warnings.append("not running as root: the student's kernel runs as you, sees what you see "
                        "(solutions/, the gradebook) and is limited by rlimits only")
        return {**settings, "namespaces": False, "user": ""}, warnings
    hidden = [p for p in settings["hide"] if os.path.exists(p)]
    check = ("import os, sys, json\n"
             "def seen(p):\n"
             "    try:\n"
             "        return bool(os.listdir(p)) if os.path.isdir(p) else open(p, 'rb').read(1) != b''\n"
             "    except OSError:\n"
             "        return False\n"
             "seen = [p for p in json.loads(sys.argv[1]) if seen(p)]\n"
             "import ipykernel, course_utils\n"
             "print(json.dumps({'uid': os.getuid(), 'seen': seen}))\n")
    attempts = [settings, {**settings, "namespaces": False}, {**settings, "namespaces": False, "user": ""}]
    for attempt in attempts:
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json") as conn:
            conn.write("{}")
            conn.flush()
            cmd = launcher_cmd(attempt) + [sys.executable, "-c", check, json.dumps(hidden), "-f", conn.name]
            try:
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                continue
        if run.returncode == 0:
            seen = json.loads(run.stdout.strip().splitlines()[-1])["seen"]
            if not attempt["namespaces"]:
                warnings.append("mount/PID namespaces unavailable: the kernel runs in the host file system"
                                + (f" and can list {', '.join(seen)}" if seen else ""))
            if not attempt["user"]:
                warnings.append("cannot run the kernel as an unprivileged user: it runs as root "
                                "and could read or write any file it can reach")
            return attempt, warnings
        warnings.append(f"sandbox {attempt_name(attempt)} does not work here: "
                        f"{(run.stderr.strip().splitlines() or ['exit ' + str(run.returncode)])[-1]}")
    return {**settings, "namespaces": False, "user": ""}, warnings


def attempt_name(settings):
    return "with namespaces" if settings["namespaces"] else (
        f"as user {settings['user']}" if settings["user"] else "as root")


def _kernel_manager_class():
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Dict

    class SandboxKernelManager(AsyncKernelManager):
        """A kernel manager that starts the kernel through the launcher above."""
        sandbox = Dict({}, help="launcher settings (see autograder.sandbox.DEFAULTS)").tag(config=True)

        def format_kernel_cmd(self, extra_arguments=None):
            return launcher_cmd(self.sandbox) + super().format_kernel_cmd(extra_arguments)

    return SandboxKernelManager


if __name__ == "__main__":
    sep = sys.argv.index("--")
    launch(json.loads(sys.argv[1]), sys.argv[sep + 1:])
else:
    SandboxKernelManager = _kernel_manager_class()
