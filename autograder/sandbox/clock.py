"""How much CPU a kernel's processes had, and how long they waited for one: Linux's schedstat, read from outside.

A cell's time limit is wall-clock time, and on a machine busy with other work a kernel can spend most of it
runnable but waiting for a core. `/proc/<pid>/task/<tid>/schedstat` holds, per thread, the nanoseconds it ran
and the nanoseconds it waited on a run queue (ready, not running). The grader reads them for the kernel's whole
process tree (the sandbox launcher, bubblewrap, the kernel, its threads and children) at the start of a cell and
when the cell times out: a kernel that waited for a core at least half as long as it ran, and for a tenth of
the cell's wall time or more, was starved, and the timeout is not the student's (STARVED). A loop that runs
forever on a quiet machine waits a few per cent; code that sleeps waits for nothing; both are charged.
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
    return Clock(ran / 1e9, waited / 1e9, time.monotonic()) if readable else None


def starved(start, end):
    """(starved?, why) between two Clocks of one kernel: whether it waited for a core long enough that a timeout in
    between is the busy machine's doing, not the student's code's. Never starved when either reading is missing."""
    if start is None or end is None:
        return False, "no schedstat here: the timeout is charged"
    ran, waited, wall = end.ran - start.ran, end.waited - start.waited, end.at - start.at
    why = f"in {wall:.1f} s the kernel ran {ran:.1f} s and waited {waited:.1f} s for a core"
    return waited >= WAIT_PER_RUN * ran and waited >= WAIT_PER_WALL * wall, why


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []
