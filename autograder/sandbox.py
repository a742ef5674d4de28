"""Run a student's kernel in a sandbox: bubblewrap, its own uid, cgroup limits, a private channel.

Run as a script, this file is a launcher: `python sandbox.py SETTINGS_JSON -- KERNEL_CMD...`.
The kernel manager (SandboxKernelManager, below) puts it in front of the kernel command and
talks to the kernel over Unix sockets (jupyter's `ipc` transport) in a private runtime
directory that holds the connection file. The launcher, started as root by the grader:

1. gives the kernel its own unprivileged uid (`uid_base` + the launcher's pid, unique while it
   runs), so no two kernels share a process limit or can read each other's files;
2. puts it in its own memory and pids cgroup (v1 or v2, where the machine lets root create
   one): resident memory (tmpfs pages included) and processes are capped per kernel;
3. starts it through Debian's bubblewrap (`bwrap`) with an allow-list file system: /usr and the
   few /etc files Python needs, the Python installation and site-packages, course_utils, all
   read-only; the runtime directory (a 1 MB tmpfs the launcher mounts); the kernel's own copy of the submission directory on a
   small private tmpfs (its working directory); a small private /tmp and /dev/shm; and nothing
   else. New network (loopback only), PID, IPC and UTS namespaces, a new session, and
   --die-with-parent: every process the kernel starts dies with it;
4. sets resource limits (processes, file size, CPU seconds, open files, and address space
   where there is no memory cgroup) and no-new-privileges in a tiny stub that then becomes
   the kernel, after switching to the kernel's uid;
5. forwards SIGINT (jupyter's interrupt) to the kernel, and removes the cgroups and the
   tmpfs at the end; killed before it can (SIGKILL, with its worker past the hard limit), its
   janitor does it (see "nothing left behind by a killed launcher", below).

Run as an ordinary user, bubblewrap still gives the namespaces and the allow-list file system
(through a user namespace), but every kernel runs as that user and no cgroup is made. Without
bubblewrap, only the resource limits (and, as root, the separate uid and the cgroups) hold.
`probe` finds out which of these work here and says loudly what does not hold; the README's
"What the sandbox guarantees" lists each claim and the test that checks it.

The launcher uses only the standard library: it runs before anything is imported in the kernel.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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
    memory_mb=4096,         # resident memory per kernel (cgroup), else address space (RLIMIT_AS)
    nproc=512,              # processes and threads per kernel (pids cgroup, and RLIMIT_NPROC of its uid)
    fsize_mb=64,            # RLIMIT_FSIZE: largest file the kernel may write
    cpu_s=600,              # RLIMIT_CPU of each kernel process
    nofile=1024,            # RLIMIT_NOFILE
    tmp_mb=256,             # size of the private /tmp; the working directory and /dev/shm get a quarter each
    font_cache="",          # the grader's matplotlib cache: its font list seeds the kernel's (saves a rebuild)
)
ETC = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
       "/etc/nsswitch.conf", "/etc/fonts", "/etc/mime.types"]

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


def bwrap_path():
    return shutil.which("bwrap")


# ---------------------------------------------------------------- cgroups (root only)

def cgroup_bases():
    """{controller: directory under which a per-kernel cgroup can be made}, v1 or v2; {} if none."""
    own = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    own[c] = path
    except OSError:
        return {}
    bases = {}
    for c in ("memory", "pids"):  # cgroup v1: a child of the cgroup we are in
        if c in own and os.path.isdir(f"/sys/fs/cgroup/{c}"):
            base = os.path.normpath(f"/sys/fs/cgroup/{c}/{own[c]}")
            if os.access(base, os.W_OK) and os.path.exists(f"{base}/cgroup.procs"):
                bases[c] = base
    if len(bases) == 2:
        return bases
    if "" in own and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # cgroup v2: a sibling of ours
        # (a v2 cgroup that has processes cannot give controllers to children: use its parent)
        parent = os.path.normpath("/sys/fs/cgroup/" + os.path.dirname(own[""].rstrip("/")))
        try:
            with open(f"{parent}/cgroup.subtree_control") as f:
                enabled = f.read().split()
        except OSError:
            return {}
        if {"memory", "pids"} <= set(enabled) and os.access(parent, os.W_OK):
            return {"v2": parent}
    return {}


class Cgroups:
    """One memory + pids cgroup for one kernel (v1: one per controller; v2: one with both)."""

    @classmethod
    def existing(cls, name):
        """The cgroups a launcher named `name` made (to remove them when it was killed before it could)."""
        bases, self = cgroup_bases(), cls.__new__(cls)
        self.dirs = ([os.path.join(bases["v2"], "autograder", name)] if "v2" in bases else
                     [os.path.join(bases[c], f"autograder-{name}") for c in ("memory", "pids") if c in bases])
        return self

    def __init__(self, name, memory_mb, nproc):
        self.dirs = []
        Cgroups.existing(name).remove()  # one left by a killed launcher whose pid this one now has
        bases = cgroup_bases()
        if "v2" in bases:
            group = os.path.join(bases["v2"], "autograder", name)
            os.makedirs(group)
            self.dirs = [group]
            try:
                _write(f"{os.path.dirname(group)}/cgroup.subtree_control", "+memory +pids")
            except OSError:
                pass
            _write(f"{group}/memory.max", str(memory_mb << 20))
            _write(f"{group}/memory.swap.max", "0", missing_ok=True)
            _write(f"{group}/pids.max", str(nproc))
        elif bases:
            mem, pids = (os.path.join(bases[c], f"autograder-{name}") for c in ("memory", "pids"))
            os.mkdir(mem)
            self.dirs.append(mem)
            os.mkdir(pids)
            self.dirs.append(pids)
            _write(f"{mem}/memory.limit_in_bytes", str(memory_mb << 20))
            _write(f"{mem}/memory.memsw.limit_in_bytes", str(memory_mb << 20), missing_ok=True)
            _write(f"{pids}/pids.max", str(nproc))
        else:
            raise OSError("no writable memory and pids cgroup controllers")

    def join(self):
        for d in self.dirs:
            _write(f"{d}/cgroup.procs", "0")

    def remove(self):
        for d in self.dirs:
            for _ in range(50):  # the last processes of the kernel may still be exiting
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    try:
                        with open(f"{d}/cgroup.procs") as f:
                            for pid in f.read().split():
                                os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
                    time.sleep(0.05)


# ---------------------------------------------------------------- nothing left behind by a killed launcher
#
# The launcher removes its cgroups and unmounts the runtime tmpfs when the kernel ends. A launcher
# killed outright (SIGKILL: a worker killed past the hard limit takes its kernels' launchers with it)
# cannot, so before it makes either, it starts a janitor: a tiny process in a session of its own
# (no process-group kill of the worker or the launcher reaches it) that waits on a pipe only the
# launcher holds. The launcher writes "done" there after its own clean-up; end of file without it
# means the launcher was killed, and the janitor kills what is left in the cgroups, removes them,
# unmounts the runtime tmpfs (recognised by its mount source, `autograder-<launcher pid>`, and only
# while it is the top mount there) and, once the process that started the launcher (the worker's
# kernel manager) is gone too, removes the runtime folder. `sweep()` does the same for anything a
# killed janitor left, from the mounts' and cgroups' names, for every launcher no longer running;
# `probe` runs it before each grading run.

def _mount_tag(pid):
    return f"autograder-{pid}"


def _mounts():
    """[(mount point, fs type, source)] of this mount namespace, in mount order (the last one on top)."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                point = left.split()[4]
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), point)
                kind, source = (right.split() + ["", ""])[:2]
                found.append((point, kind, source))
    except OSError:
        pass
    return found


def _unmount_if_ours(path, tag):
    """Lazily unmount the tmpfs `tag` at `path` if it is the top mount there; True when it did."""
    on_top = [source for point, kind, source in _mounts() if point == path]
    if on_top and on_top[-1] == tag:
        return _libc.umount2(path.encode(), MNT_DETACH) == 0
    return False


def _alive(pid):
    """True while `pid` runs (a zombie is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _is_launcher(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return _alive(pid) and os.path.basename(__file__).encode() in f.read()
    except OSError:
        return False


def _clean_after(launcher, runtime, parent):
    """What a killed launcher left: its cgroups, its runtime tmpfs, and (its parent gone) the runtime folder."""
    Cgroups.existing(str(launcher)).remove()
    _unmount_if_ours(runtime, _mount_tag(launcher))
    for _ in range(40):  # the worker is killed with its launcher: give it 2 s to be gone
        if not _alive(parent):
            if os.path.basename(runtime).startswith("ag-") and not os.path.ismount(runtime):
                shutil.rmtree(runtime, ignore_errors=True)
            return
        time.sleep(0.05)


def _start_janitor(runtime):
    """Fork the janitor (see above); returns the write end of its pipe, to be sent "done" by a clean exit."""
    launcher, parent = os.getpid(), os.getppid()
    r, w = os.pipe()  # not inherited by the kernel (close-on-exec): only the launcher holds `w`
    first = os.fork()
    if first == 0:
        try:
            os.setsid()
            if os.fork() == 0:  # the janitor: a grandchild, so nobody has to wait for it
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, r)
                os.closerange(r + 1, 65536)
                os.set_inheritable(r, True)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_IGN)  # kept across exec: only SIGKILL stops it
                # a fresh interpreter with an empty environment: nothing of the launcher's memory or settings
                os.execve(sys.executable, [sys.executable, "-I", "-S", os.path.abspath(__file__), "--janitor",
                                           str(r), str(launcher), str(parent), runtime], {})
        except BaseException:  # noqa: BLE001: never run the launcher's code in a child
            pass
        os._exit(0)
    os.close(r)
    os.waitpid(first, 0)
    return w


def _janitor(r, launcher, parent, runtime):
    """Wait for the launcher's "done"; without it (end of file: the launcher was killed), clean up after it."""
    said = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        said += chunk
    if b"done" not in said:
        _clean_after(launcher, runtime, parent)


def sweep(log=None):
    """Remove what killed launchers left (root only): runtime tmpfs mounts and cgroups of launchers not running."""
    removed = []
    if os.geteuid() != 0:
        return removed
    for point, kind, source in reversed(_mounts()):
        found = re.fullmatch(r"autograder-(\d+)", source)
        if kind == "tmpfs" and found and not _is_launcher(int(found.group(1))):
            if _unmount_if_ours(point, source):
                removed.append(f"runtime tmpfs {point}")
    bases = cgroup_bases()
    folders = [os.path.join(bases["v2"], "autograder")] if "v2" in bases else list(bases.values())
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            group = re.fullmatch(r"(?:autograder-)?(?:probe-)?(\d+)", name)
            if group and ("v2" in bases or name.startswith("autograder-")) and not _alive(int(group.group(1))):
                left = Cgroups.existing(name.removeprefix("autograder-"))
                present = [d for d in left.dirs if os.path.exists(d)]
                left.remove()
                removed += [f"cgroup {d}" for d in present if not os.path.exists(d)]
    for what in removed if log else []:
        log(f"removed what a killed kernel launcher left: {what}")
    return removed


def _write(path, text, missing_ok=False):
    try:
        with open(path, "w") as f:
            f.write(text)
    except FileNotFoundError:
        if not missing_ok:
            raise


# ---------------------------------------------------------------- the command line

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
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(tmp), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(tmp // 4), "--tmpfs", "/dev/shm"]
    made = {"/", "/usr", "/tmp", "/dev", "/proc", "/etc", "/run"}
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/run"]
    for path in ETC:
        args += ["--ro-bind-try", path, path]
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


# The stub runs inside the sandbox (as root in it when the grader is root) and becomes the kernel.
STUB = r"""
import ctypes, json, os, resource, shutil, signal, sys
cfg = json.loads(sys.argv[1]); cmd = sys.argv[2:]
uid, home = cfg["uid"], cfg["home"]
if cfg["copy_from"]:
    shutil.copytree(cfg["copy_from"], os.getcwd(), dirs_exist_ok=True, symlinks=True)
os.makedirs(home, mode=0o700, exist_ok=True)
if os.path.isdir(cfg["font_cache"]):
    os.makedirs(os.path.join(home, ".matplotlib"), exist_ok=True)
    for name in os.listdir(cfg["font_cache"]):
        if name.startswith("fontlist-") and name.endswith(".json"):
            shutil.copyfile(os.path.join(cfg["font_cache"], name), os.path.join(home, ".matplotlib", name))
if uid is not None:
    for folder in (os.getcwd(), home):
        for top, dirs, files in os.walk(folder):
            for name in [top] + [os.path.join(top, n) for n in dirs + files]:
                os.lchown(name, uid, uid)
for name, value in cfg["limits"]:
    resource.setrlimit(getattr(resource, name), (value, value))
if uid is not None:
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
signal.signal(signal.SIGINT, signal.SIG_DFL)  # the launcher forwards jupyter's interrupts
os.execv(cmd[0], cmd)
"""


def _limits(settings, cgroup):
    """rlimits of the kernel; with a memory cgroup, resident memory is capped there, not address space."""
    mb = 1 << 20
    limits = [("RLIMIT_AS", 0 if cgroup else settings["memory_mb"] * mb), ("RLIMIT_NPROC", settings["nproc"]),
              ("RLIMIT_FSIZE", settings["fsize_mb"] * mb), ("RLIMIT_CPU", settings["cpu_s"]),
              ("RLIMIT_NOFILE", settings["nofile"]), ("RLIMIT_CORE", 0)]
    return [(n, v) for n, v in limits if v or n == "RLIMIT_CORE"]


def _kernel_env(home, python_path=()):
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    # the grader's own course_utils, whatever an editable install's finder says (it may name another clone)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([*python_path, *filter(None, [env.get("PYTHONPATH")])])
    env.update(HOME=home, USER="student", LOGNAME="student", TMPDIR="/tmp", IPYTHONDIR=f"{home}/.ipython",
               MPLCONFIGDIR=f"{home}/.matplotlib", JUPYTER_RUNTIME_DIR=f"{home}/.jupyter",
               JUPYTER_DATA_DIR=f"{home}/.jupyter", XDG_CACHE_HOME=f"{home}/.cache",
               # the kernel's parent is bubblewrap's init (pid 1): 1 tells ipykernel not to poll it
               JPY_PARENT_PID="1",
               COURSE_FAST="1")  # grading runs in fast mode, whatever the instructor's shell says
    return env


def launch(settings, cmd):
    """Start `cmd` (a kernel command whose `-f FILE` is in the runtime directory) sandboxed; wait for it."""
    settings = {**DEFAULTS, **settings}
    root = os.geteuid() == 0
    cmd = list(cmd)
    i = cmd.index("-f") + 1
    runtime = os.path.dirname(os.path.abspath(cmd[i]))
    with open(cmd[i]) as f:
        connection = f.read()
    transport = json.loads(connection or "{}").get("transport", "ipc")
    if not os.path.basename(runtime).startswith(("ag-", "rt")) or transport != "ipc":
        # not a private runtime directory made by SandboxKernelManager: never chown or bind a shared one
        print(f"autograder sandbox: {cmd[i]} is not in a private runtime directory with the ipc transport "
              "(use autograder.sandbox.SandboxKernelManager)", file=sys.stderr, flush=True)
        os._exit(126)
    use_bwrap = bool(settings["bwrap"] and bwrap_path())
    cgroups, mounted, status, janitor = None, False, 127 << 8, None
    try:
        if root and (settings["cgroup"] or use_bwrap):
            janitor = _start_janitor(runtime)  # cleans up if this process is killed before its `finally`
        if root and settings["cgroup"]:
            try:
                cgroups = Cgroups(f"{os.getpid()}", settings["memory_mb"], settings["nproc"])
            except OSError as e:
                print(f"autograder sandbox: WARNING: no cgroup for this kernel ({e}): memory is capped as "
                      "address space only", file=sys.stderr, flush=True)
        if root and use_bwrap:  # a 1 MB tmpfs over the runtime directory: the kernel cannot fill the disk through it
            for point, _, source in reversed(_mounts()):  # a killed launcher's, before a restart of the kernel
                if point == runtime and source.startswith(_mount_tag("")):
                    _libc.umount2(runtime.encode(), MNT_DETACH)
            mounted = _libc.mount(_mount_tag(os.getpid()).encode(), runtime.encode(), b"tmpfs",
                                  ctypes.c_ulong(MS_NOSUID | MS_NODEV), b"size=1m,nr_inodes=64,mode=0700") == 0
            with open(cmd[i], "w") as f:
                f.write(connection)
        status = _run(settings, cmd, runtime, use_bwrap, cgroups)
    finally:
        if cgroups:
            cgroups.remove()
        if mounted:
            _libc.umount2(runtime.encode(), MNT_DETACH)
        if janitor is not None:
            os.write(janitor, b"done")
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _run(settings, cmd, runtime, use_bwrap, cgroups):
    """Fork bubblewrap (or the stub alone), forward interrupts to the kernel, return its wait status."""
    root = os.geteuid() == 0
    uid = settings["uid_base"] + os.getpid() if root and settings["separate_user"] else None
    home = "/tmp/home" if use_bwrap else os.path.join(runtime, "home")
    if uid is not None:
        for path in [runtime] + [os.path.join(runtime, n) for n in os.listdir(runtime)]:
            os.chown(path, uid, uid)
        os.chmod(runtime, 0o700)
    stub_cfg = dict(uid=uid, home=home, limits=_limits(settings, cgroups is not None),
                    copy_from=SUBMISSION if use_bwrap else "",
                    font_cache=FONT_CACHE if use_bwrap and settings["font_cache"] else settings["font_cache"])
    stub = [sys.executable, "-I", "-S", "-c", STUB, json.dumps(stub_cfg)]
    info_r = info_w = None
    if use_bwrap:
        shown = uid if uid is not None else os.getuid()
        with open(os.path.join(runtime, "passwd"), "w") as f:
            f.write(f"student:x:{shown}:{shown}:student:{home}:/bin/sh\n")
        with open(os.path.join(runtime, "group"), "w") as f:
            f.write(f"student:x:{shown}:\n")
        info_r, info_w = os.pipe()
        full = bwrap_args(settings, runtime, os.getcwd(), info_w, root) + ["--"] + stub + cmd
    else:
        full = stub + cmd
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, 0)  # jupyter's SIGINT to the launcher's group is forwarded, never fatal to bwrap
            if cgroups:
                cgroups.join()
            if info_r is not None:
                os.close(info_r)
                os.set_inheritable(info_w, True)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.execve(full[0], full, _kernel_env(home, settings["python_path"]))
        except BaseException as e:  # noqa: BLE001: report, then die without running the parent's code
            print(f"autograder sandbox: cannot start the kernel: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader died: so do we, and bwrap with us
    kernel = [child if not use_bwrap else None]
    if info_w is not None:
        os.close(info_w)

    def kernel_pid():
        if kernel[0] is None and info_r is not None:
            try:
                init = json.loads(os.read(info_r, 4096).decode())["child-pid"]
                kernel[0] = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == init)
            except (OSError, ValueError, KeyError, StopIteration):
                return None
        return kernel[0]

    def forward(signum, _frame):
        pid = kernel_pid()
        if pid:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
    return os.waitpid(child, 0)[1]


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def launcher_cmd(settings):
    """The prefix that runs a command through this launcher."""
    return [sys.executable, os.path.abspath(__file__), json.dumps(settings), "--"]


# ---------------------------------------------------------------- probe: what holds here

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
import importlib.util, ipykernel
assert importlib.util.find_spec("course_utils"), "course_utils is not importable in the sandbox"
print(json.dumps({"uid": os.getuid(), "seen": hidden, "net": net}))
"""


def probe(settings, timeout=120):
    """Try the launcher once with a kernel-like command; return (settings that work, warnings).

    Drops bubblewrap, then the separate user, then the cgroups, when they fail here, and says
    so, naming each guarantee that does not hold.
    """
    settings = {**DEFAULTS, **settings}
    hidden = [p for p in settings.get("must_not_see", []) if os.path.exists(p)]
    warnings = []
    root = os.geteuid() == 0
    sweep()  # what launchers killed in an earlier run left (their janitors normally remove it at once)
    if settings["bwrap"] and not bwrap_path():
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
    if settings["bwrap"] and not attempt["bwrap"]:
        warnings.append("bubblewrap fails here: the kernel sees the whole file system, the network and every process")
    if root and settings["separate_user"] and not attempt["separate_user"]:
        warnings.append("cannot run the kernel as its own unprivileged uid: it runs as root, shares the process "
                        "limit with the other kernels and can read or write any file it can reach")
    if out["seen"]:
        warnings.append(f"the kernel can read {', '.join(out['seen'])}")
    if out["net"] and attempt["bwrap"]:
        warnings.append("the kernel can reach the host's loopback network")
    return attempt, warnings


def _try(settings, hidden, port, timeout):
    with tempfile.TemporaryDirectory(prefix="ag-probe-") as work:
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


# ---------------------------------------------------------------- the kernel manager

def _kernel_manager_class():
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Dict

    class SandboxKernelManager(AsyncKernelManager):
        """Starts the kernel through the launcher above and talks to it over Unix sockets.

        The connection file and the sockets live in a private runtime directory (0700, owned by
        the kernel's uid; as root, the launcher mounts a 1 MB tmpfs on it for the kernel's
        lifetime), the only channel between the grader and the kernel, which has no network.
        """
        sandbox = Dict({}, help="launcher settings (see autograder.sandbox.DEFAULTS)").tag(config=True)

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self._runtime = None

        async def _async_pre_start_kernel(self, **kw):
            if self._runtime is None:
                base = tempfile.gettempdir()
                # short: a Unix socket path has at most 107 bytes
                self._runtime = tempfile.mkdtemp(prefix="ag-", dir=base if len(base) < 64 else "/tmp")
                self.connection_file = os.path.join(self._runtime, "kernel.json")
                self.ip = os.path.join(self._runtime, "k")
            return await super()._async_pre_start_kernel(**kw)

        def format_kernel_cmd(self, extra_arguments=None):
            return launcher_cmd(self.sandbox) + super().format_kernel_cmd(extra_arguments)

        async def _async_cleanup_resources(self, restart=False):
            launcher = getattr(self.provisioner, "pid", None)
            await super()._async_cleanup_resources(restart=restart)
            if launcher and os.geteuid() == 0:  # the launcher was killed (shutdown "now") before it could
                Cgroups.existing(str(launcher)).remove()
            if not restart and self._runtime:
                if os.path.ismount(self._runtime):  # the launcher was killed before it could unmount
                    _libc.umount2(self._runtime.encode(), MNT_DETACH)
                shutil.rmtree(self._runtime, ignore_errors=True)
                self._runtime = None

        cleanup_resources = _async_cleanup_resources

    return SandboxKernelManager


if __name__ == "__main__" and sys.argv[1:2] == ["--janitor"]:
    _janitor(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
elif __name__ == "__main__":
    sep = sys.argv.index("--")
    launch(json.loads(sys.argv[1]), sys.argv[sep + 1:])
else:
    SandboxKernelManager = _kernel_manager_class()
