"""Nothing left behind by a killed launcher.

The launcher removes its cgroups and unmounts the runtime tmpfs when the kernel ends. A launcher
killed outright (SIGKILL: a worker killed past the hard limit takes its kernels' launchers with it)
cannot, so before it makes either, it starts a janitor: a tiny process in a session of its own
(no process-group kill of the worker or the launcher reaches it) that waits on a pipe only the
launcher holds. The launcher writes "done" there after its own clean-up; end of file without it
means the launcher was killed, and the janitor kills what is left in the cgroups, removes them,
unmounts the runtime tmpfs (recognised by its mount source, `autograder-<launcher pid>`, and only
while it is the top mount there) and, once the process that started the launcher (the worker's
kernel manager) is gone too, removes the runtime folder. `sweep()` does the same for anything a
killed janitor left, from the mounts' and cgroups' names, for every launcher no longer running, and removes
the folders of probes whose grader was killed (named after the grader's pid); `probe` runs it before each
grading run.

Run as a script (`python -I -S janitor.py --janitor ...`), this file is the janitor.
"""
import os
import re
import shutil
import signal
import stat
import sys
import time

# Imported as autograder.sandbox.X by the grader, and as a plain module by the launcher and the janitor, which
# run this folder's files as scripts (standard library only: nothing is imported in the kernel before them).
if __package__:
    from .cgroups import Cgroups, cgroup_bases
    from .system import alive, mount_tag, mounts, unmount_if_ours
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cgroups import Cgroups, cgroup_bases
    from system import alive, mount_tag, mounts, unmount_if_ours


LAUNCHER_MARK = b"sandbox"  # in every launcher's command line: the folder of launcher.py
PROBE_PREFIX = "ag-probe-"  # + the probing grader's pid + "-": the temporary folder of one probe (probing.py)


def _is_launcher(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return alive(pid) and LAUNCHER_MARK in f.read()
    except OSError:
        return False


def _clean_after(launcher, runtime, parent):
    """What a killed launcher left: its cgroups, its runtime tmpfs, and (its parent gone) the runtime folder."""
    Cgroups.existing(str(launcher)).remove()
    unmount_if_ours(runtime, mount_tag(launcher))
    for _ in range(40):  # the worker is killed with its launcher: give it 2 s to be gone
        if not alive(parent):
            if os.path.basename(runtime).startswith("ag-") and not os.path.ismount(runtime):
                shutil.rmtree(runtime, ignore_errors=True)
            return
        time.sleep(0.05)


def start_janitor(runtime):
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
    """Remove what killed graders and launchers left: the folders of probes whose grader no longer runs, and (root
    only) the runtime tmpfs mounts and cgroups of launchers no longer running."""
    removed = _mounts_and_cgroups() if os.geteuid() == 0 else []
    removed += _probe_folders()
    for what in removed if log else []:
        log(f"removed what a killed grader or kernel launcher left: {what}")
    return removed


def _mounts_and_cgroups():
    removed = []
    for point, kind, source in reversed(mounts()):
        found = re.fullmatch(r"autograder-(\d+)", source)
        if kind == "tmpfs" and found and not _is_launcher(int(found.group(1))):
            if unmount_if_ours(point, source):
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
            if group and ("v2" in bases or name.startswith("autograder-")) and not alive(int(group.group(1))):
                left = Cgroups.existing(name.removeprefix("autograder-"))
                present = [d for d in left.dirs if os.path.exists(d)]
                left.remove()
                removed += [f"cgroup {d}" for d in present if not os.path.exists(d)]
    return removed


def _probe_folders():
    """This user's probe folders whose grader was killed mid-probe (tempfile's own clean-up never ran). A link,
    another user's folder, or one with a mount still inside (the mounts are swept first) is left alone."""
    import tempfile
    top, removed = tempfile.gettempdir(), []
    for name in os.listdir(top):
        found = re.fullmatch(re.escape(PROBE_PREFIX) + r"(\d+)-\w+", name)
        path = os.path.join(top, name)
        if not found or alive(int(found.group(1))):
            continue
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if any(os.path.ismount(os.path.join(path, sub)) for sub in os.listdir(path)):
            continue
        shutil.rmtree(path, ignore_errors=True)  # rmtree never follows a link inside
        if not os.path.lexists(path):
            removed.append(f"probe folder {path}")
    return removed


if __name__ == "__main__" and sys.argv[1:2] == ["--janitor"]:
    _janitor(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
