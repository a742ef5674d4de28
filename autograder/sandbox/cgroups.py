"""One memory + pids cgroup per kernel (root only), v1 or v2. Standard library only (see launcher.py)."""
import os
import signal
import sys
import time

if __package__:  # (run as a plain module by the launcher and the janitor: see janitor.py)
    from .system import alive
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from system import alive


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


class KernelCgroup:
    """A kernel's memory cgroup read from outside (by the grader, root): the processes in it beside the kernel's
    own (`others()`), and the resident memory it added between `start()` and `added(mark)`.

    Memory: everything the kernel's processes make resident counts (PyTorch's, numpy's, Python's, any child's),
    whatever runs in them; memory already resident when the window opens (a buffer made by an earlier cell) does
    not. cgroup v1: `memory.max_usage_in_bytes` is reset to the current usage (writing 0) and read; cgroup v2
    (Linux 6.12 or newer): `memory.peak` is reset for one open file and read through it."""

    def __init__(self, directory):
        self.directory = directory
        self._v2 = os.path.exists(f"{directory}/memory.peak")
        self.own = self.processes()

    @classmethod
    def of(cls, name):
        """The KernelCgroup of the kernel whose launcher is named `name`, or None (no memory cgroup, not root, or
        a cgroup whose peak cannot be reset)."""
        for directory in Cgroups.existing(name).dirs:
            if os.path.exists(f"{directory}/memory.max_usage_in_bytes") or os.path.exists(f"{directory}/memory.peak"):
                group = cls(directory)
                mark = group.start()
                if mark is not None and group.own is not None:
                    group.added(mark)
                    return group
        return None

    def processes(self):
        """The ids of the living processes in the cgroup now (threads and zombies not listed), or None."""
        try:
            with open(f"{self.directory}/cgroup.procs") as f:
                listed = [int(pid) for pid in f.read().split()]
        except (OSError, ValueError):
            return None
        return frozenset(pid for pid in listed if alive(pid))

    def others(self):
        """The living processes in the cgroup that were not there when this object was made (the grader makes it
        as the kernel starts, before any cell: then the sandbox's own processes and the kernel are all there is)."""
        now = self.processes()
        return frozenset() if now is None or self.own is None else now - self.own

    def start(self):
        """Open a window: its mark (None if the peak cannot be reset)."""
        try:
            if self._v2:
                f = open(f"{self.directory}/memory.peak", "r+")
                try:
                    f.write("reset\n")
                    f.flush()
                    f.seek(0)
                    return f, int(f.read())
                except (OSError, ValueError):
                    f.close()
                    raise
            _write(f"{self.directory}/memory.max_usage_in_bytes", "0")
            return None, _read_int(f"{self.directory}/memory.max_usage_in_bytes")
        except (OSError, ValueError):
            return None

    def added(self, mark):
        """Bytes the cgroup's peak rose above its usage when the window `mark` opened; None if unreadable."""
        if mark is None:
            return None
        handle, start = mark
        try:
            if handle is not None:
                with handle:
                    handle.seek(0)
                    return max(0, int(handle.read()) - start)
            return max(0, _read_int(f"{self.directory}/memory.max_usage_in_bytes") - start)
        except (OSError, ValueError):
            return None


def _read_int(path):
    with open(path) as f:
        return int(f.read())


def _write(path, text, missing_ok=False):
    try:
        with open(path, "w") as f:
            f.write(text)
    except FileNotFoundError:
        if not missing_ok:
            raise
