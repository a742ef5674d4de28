"""How much CPU a kernel's processes had, and how long they waited for one: Linux's schedstat, read from outside.

A cell's time limit is wall-clock time, and on a machine busy with other work a kernel can spend most of it
runnable but waiting for a core. `/proc/<pid>/task/<tid>/schedstat` holds, per thread, the nanoseconds it ran
and the nanoseconds it waited on a run queue (ready, not running). The grader reads them for the kernel's whole
process tree (the sandbox launcher, bubblewrap, the kernel, its threads and children) at the start of a cell and
when the cell times out: a kernel that waited for a core at least half as long as it ran, and for a tenth of
the cell's wall time or more, was starved, and the timeout is not the student's (STARVED). A loop that runs
forever on a quiet machine waits a few per cent; code that sleeps waits for nothing; both are charged.

Only a wait the machine's OTHER work explains counts: the CPU time every process spent (/proc/stat) less the
kernel's own tree's is the most the tree can have waited on others; the rest of its wait is for itself (busy
child processes or threads of the student's, more than the cores given), and a timeout then is charged.
"""
import os
import time
from dataclasses import dataclass

WAIT_PER_RUN = 0.5    # starved: waited for a core at least half as long as it ran ...
WAIT_PER_WALL = 0.1   # ... and for a tenth of the cell's wall time or more


@dataclass(frozen=True)
class Clock:
    """A kernel's process tree at one moment: seconds it ran and waited for a core, and the monotonic time."""
    ran: float
    waited: float
    at: float
    busy: float | None = None  # CPU seconds every process of the machine had run (/proc/stat), where readable


def read(pid):
    """The Clock of the process tree rooted at `pid` (its threads and descendants), or None where Linux's
    schedstat cannot be read (another OS, no /proc, a kernel built without it)."""
    if not pid:
        return None
    ran = waited = 0
    seen, todo, readable = set(), [int(pid)], False
    while todo:
        proc = todo.pop()
        if proc in seen:
            continue
        seen.add(proc)
        for thread in _listdir(f"/proc/{proc}/task"):
            try:
                with open(f"/proc/{proc}/task/{thread}/schedstat") as f:
                    on_cpu, on_queue, _ = (int(x) for x in f.read().split()[:3])
                ran, waited, readable = ran + on_cpu, waited + on_queue, True
            except (OSError, ValueError):
                pass
            try:
                with open(f"/proc/{proc}/task/{thread}/children") as f:
                    todo += [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                pass
    return Clock(ran / 1e9, waited / 1e9, time.monotonic(), _machine_busy()) if readable else None


def _machine_busy():
    """CPU seconds every process of the machine has run since boot (user, nice, system, irq, softirq, steal), or
    None where /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        return (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def starved(start, end):
    """(starved?, why) between two Clocks of one kernel: whether it waited for a core long enough that a timeout in
    between is the busy machine's doing, not the student's code's. Never starved when either reading is missing."""
    if start is None or end is None:
        return False, "no schedstat here: the timeout is charged"
    ran, waited, wall = end.ran - start.ran, end.waited - start.waited, end.at - start.at
    why = f"in {wall:.1f} s the kernel ran {ran:.1f} s and waited {waited:.1f} s for a core"
    if start.busy is not None and end.busy is not None:  # the wait other work explains, at most what it ran
        others = max(end.busy - start.busy - ran, 0.0)
        why += f", while the machine's other work ran {others:.1f} s"
        waited = min(waited, others)
    return waited >= WAIT_PER_RUN * ran and waited >= WAIT_PER_WALL * wall, why


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []
