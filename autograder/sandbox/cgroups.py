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


# The most of a call's figure that a request running none of the student's code may account for (KernelCgroup.added):
# such a request touched 22 to 32 MiB of the kernel's memory where it was measured (docs/instructors.md), and a
# kernel whose code inflates it (a thread touching a buffer while the grader measures) gains no more than this.
FLOOR_MAX = 64 << 20


class KernelCgroup:
    """A kernel's memory cgroup read from outside (by the grader, root): the processes in it beside the kernel's
    own (`others()`), and the memory a call held between `start()` and `added(mark)`.

    What a call held, as the most bytes it can have had at once (see `added`): the cgroup's peak rise (all its
    processes make resident, whatever runs in them: PyTorch's, numpy's, Python's, any child's); the memory that
    was resident before the window and that the call touched (each process's accessed bits are cleared as the
    window opens, Linux's /proc/PID/clear_refs, and the pages of its mappings that can hold data, anonymous,
    writable or shared, are read back from /proc/PID/smaps as it closes: a buffer an earlier cell filled and the
    call reused); what the call released (a buffer used and freed before it returned); and the bytes it wrote to
    files (/proc/PID/io: a file in /tmp or /dev/shm filled before the call and written through write()). A request
    touches tens of MiB of the kernel's objects whatever it runs, so the caller passes the figure of one that runs
    none of the student's code as `floor`. cgroup v1: `memory.max_usage_in_bytes` is reset to the current usage
    (writing 0) and read; cgroup v2 (Linux 6.12 or newer): `memory.peak` is reset for one open file and read
    through it."""

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
        """Open a window: its mark (None if the peak cannot be reset or the memory not read)."""
        pids = self.processes() or frozenset()
        for pid in pids:
            try:
                _write(f"/proc/{pid}/clear_refs", "1")  # every page's accessed bit, for `touched`
            except OSError:
                pass  # (a process that just ended)
        try:
            before = self._kept(), _written(pids)
            if self._v2:
                f = open(f"{self.directory}/memory.peak", "r+")
                try:
                    f.write("reset\n")
                    f.flush()
                    f.seek(0)
                    return f, int(f.read()), before
                except (OSError, ValueError):
                    f.close()
                    raise
            _write(f"{self.directory}/memory.max_usage_in_bytes", "0")
            return None, _read_int(f"{self.directory}/memory.max_usage_in_bytes"), before
        except (OSError, ValueError):
            return None

    def added(self, mark, floor=0):
        """The most bytes the call since the window `mark` opened can have held at once beyond `floor` (what a
        request that runs none of the student's code holds, read the same way: see `Session`), at most FLOOR_MAX of
        it; None if unreadable. The peak's rise, plus the pages touched less what the call left resident (touched
        new pages are in the rise already; a negative difference is what it released), plus the bytes written to
        files by the processes there both times: an honest call's own figures count about twice, a hidden buffer
        once."""
        if mark is None:
            return None
        handle, start, (kept, written) = mark
        try:
            if handle is not None:
                with handle:
                    handle.seek(0)
                    peak = int(handle.read())
            else:
                peak = _read_int(f"{self.directory}/memory.max_usage_in_bytes")
            pids = self.processes() or frozenset()
            touched, left = _touched(pids), self._kept() - kept
            held = (max(0, peak - start) + max(0, touched - left)
                    + sum(max(0, n - written.get(pid, n)) for pid, n in _written(pids).items()))
        except (OSError, ValueError):
            return None
        return max(0, held - min(floor or 0, FLOOR_MAX))

    def _kept(self):
        """The cgroup's anonymous and tmpfs bytes now (what its processes hold, page cache aside)."""
        with open(f"{self.directory}/memory.stat") as f:
            stat = dict(line.split()[:2] for line in f if line.strip())
        return sum(int(stat.get(key, 0)) for key in (("anon", "shmem") if self._v2 else ("rss", "shmem")))


def _touched(pids):
    """Bytes of the pages the processes `pids` accessed since their bits were cleared, in the mappings that can hold
    data: all but the private read-only mappings of files (a library's code, a file's contents as read)."""
    total = 0
    for pid in pids:
        counted = True
        try:
            with open(f"/proc/{pid}/smaps") as f:
                for line in f:
                    if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:  # a mapping's first line
                        fields = line.split()
                        counted = len(fields) < 6 or not fields[5].startswith("/") or fields[1][1] == "w" \
                            or fields[1][3] == "s"
                    elif counted and line.startswith("Referenced:"):
                        total += int(line.split()[1]) << 10
        except (OSError, ValueError, IndexError):
            pass
    return total


def _written(pids):
    """{pid: bytes its threads (and reaped children) passed to write() and its kin so far} for the processes."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io") as f:
                found[pid] = next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
        except (OSError, ValueError, IndexError, StopIteration):
            pass
    return found


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
