"""Run a student's kernel in a sandbox: bubblewrap, its own uid, cgroup limits, a private channel.

Run as a script, this file is a launcher: `python launcher.py SETTINGS_JSON -- KERNEL_CMD...`.
The kernel manager (SandboxKernelManager, manager.py) puts it in front of the kernel command and
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
   janitor does it (janitor.py).

Run as an ordinary user, bubblewrap still gives the namespaces and the allow-list file system
(through a user namespace), but every kernel runs as that user and no cgroup is made. Without
bubblewrap, only the resource limits (and, as root, the separate uid and the cgroups) hold.
`probe` (probing.py) finds out which of these work here and says loudly what does not hold; docs/instructors.md's
"What the sandbox guarantees" lists each claim and the test that checks it.

The launcher uses only the standard library: it runs before anything is imported in the kernel. What the
kernel may see and do is policy.py's; the cgroups are cgroups.py's; the clean-up after a kill janitor.py's.
"""
import ctypes
import json
import os
import signal
import sys
import threading

# Imported as autograder.sandbox.X by the grader, and as a plain module by the launcher and the janitor, which
# run this folder's files as scripts (standard library only: nothing is imported in the kernel before them).
if __package__:
    from .cgroups import Cgroups
    from .janitor import start_janitor
    from .policy import DEFAULTS, FONT_CACHE, SUBMISSION, bwrap_args, bwrap_path, kernel_env, rlimits
    from .system import MNT_DETACH, MS_NODEV, MS_NOSUID, PR_SET_PDEATHSIG, libc, mount_tag, mounts, ppid
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cgroups import Cgroups
    from janitor import start_janitor
    from policy import DEFAULTS, FONT_CACHE, SUBMISSION, bwrap_args, bwrap_path, kernel_env, rlimits
    from system import MNT_DETACH, MS_NODEV, MS_NOSUID, PR_SET_PDEATHSIG, libc, mount_tag, mounts, ppid


KERNEL_LOG_BYTES = 64 * 1024  # of the kernel's own stdout and stderr kept in the worker's log (_drain)

# the stub: confine.py's functions, then what becomes the kernel (run with -I -S: nothing of this package imported)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")) as _confine:
    STUB = _confine.read() + r"""
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
lacking = [what for what, holds in (("Landlock: writes under /proc", deny_proc_writes()),
                                    ("seccomp: madvise that forgets accessed pages", deny_forgetting())) if not holds]
if lacking:
    print("autograder sandbox: WARNING: this Linux refuses no " + " and no ".join(lacking) + ": the kernel can hide "
          "memory it touched from a measured call", file=sys.stderr, flush=True)
signal.signal(signal.SIGINT, signal.SIG_DFL)  # the launcher forwards jupyter's interrupts
os.execv(cmd[0], cmd)
"""


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
            janitor = start_janitor(runtime)  # cleans up if this process is killed before its `finally`
        if root and settings["cgroup"]:
            try:
                cgroups = Cgroups(f"{os.getpid()}", settings["memory_mb"], settings["nproc"])
            except OSError as e:
                print(f"autograder sandbox: WARNING: no cgroup for this kernel ({e}): memory is capped as "
                      "address space only", file=sys.stderr, flush=True)
        if root and use_bwrap:  # a 1 MB tmpfs over the runtime directory: the kernel cannot fill the disk through it
            for point, _, source in reversed(mounts()):  # a killed launcher's, before a restart of the kernel
                if point == runtime and source.startswith(mount_tag("")):
                    libc.umount2(runtime.encode(), MNT_DETACH)
            mounted = libc.mount(mount_tag(os.getpid()).encode(), runtime.encode(), b"tmpfs",
                                  ctypes.c_ulong(MS_NOSUID | MS_NODEV), b"size=1m,nr_inodes=64,mode=0700") == 0
            with open(cmd[i], "w") as f:
                f.write(connection)
        status = _run(settings, cmd, runtime, use_bwrap, cgroups)
    finally:
        if cgroups:
            cgroups.remove()
        if mounted:
            libc.umount2(runtime.encode(), MNT_DETACH)
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
    stub_cfg = dict(uid=uid, home=home, limits=rlimits(settings, cgroups is not None, use_bwrap),
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
    pipes = {1: os.pipe(), 2: os.pipe()}  # the kernel's own stdout and stderr, drained here (_drain)
    child = os.fork()
    if child == 0:
        try:
            for fd, (r, w) in pipes.items():
                os.dup2(w, fd)
                os.close(r)
                os.close(w)
            os.setpgid(0, 0)  # jupyter's SIGINT to the launcher's group is forwarded, never fatal to bwrap
            if cgroups:
                cgroups.join()
            if info_r is not None:
                os.close(info_r)
                os.set_inheritable(info_w, True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.execve(full[0], full, kernel_env(home, settings["python_path"]))
        except BaseException as e:  # noqa: BLE001: report, then die without running the parent's code
            print(f"autograder sandbox: cannot start the kernel: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader died: so do we, and bwrap with us
    if info_w is not None:
        os.close(info_w)
    for fd, (r, w) in pipes.items():
        os.close(w)
        threading.Thread(target=_drain, args=(r, fd, KERNEL_LOG_BYTES), daemon=True).start()
    _forward_signals(child, info_r, [child if not use_bwrap else None])
    return os.waitpid(child, 0)[1]


def _drain(fd, to, keep):
    """Read one of the kernel's stdout and stderr to the end: the first `keep` bytes go to the launcher's
    own (`to`: the worker's log), the rest is dropped. Never a file the kernel fills: a write the file-size limit
    refused, or a full pipe, would block the kernel's next print (ipykernel echoes fd 1 and 2 there)."""
    kept = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        except OSError:
            return
        if not chunk:
            return
        if kept < keep:
            part = chunk[:keep - kept]
            kept += len(part)
            try:
                os.write(to, part + (b"\n[autograder: later kernel output dropped]\n" if kept >= keep else b""))
            except OSError:
                pass


def _forward_signals(child, info_r, kernel):
    """SIGINT (jupyter's interrupt) to the kernel, found through bubblewrap's info pipe; SIGTERM kills the child."""
    def kernel_pid():
        if kernel[0] is None and info_r is not None:
            try:
                init = json.loads(os.read(info_r, 4096).decode())["child-pid"]
                kernel[0] = next(int(p) for p in os.listdir("/proc") if p.isdigit() and ppid(p) == init)
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


def launcher_cmd(settings):
    """The prefix that runs a command through this launcher."""
    return [sys.executable, os.path.abspath(__file__), json.dumps(settings), "--"]


if __name__ == "__main__":
    sep = sys.argv.index("--")
    launch(json.loads(sys.argv[1]), sys.argv[sep + 1:])
