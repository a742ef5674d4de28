"""The few Linux calls the sandbox makes through libc (mount, umount, prctl), the mount table, and whether a
process still runs. Standard library only (see launcher.py)."""
import ctypes
import re

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


def mount_tag(pid):
    return f"autograder-{pid}"


def mounts():
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


def unmount_if_ours(path, tag):
    """Lazily unmount the tmpfs `tag` at `path` if it is the top mount there; True when it did."""
    on_top = [source for point, kind, source in mounts() if point == path]
    if on_top and on_top[-1] == tag:
        return libc.umount2(path.encode(), MNT_DETACH) == 0
    return False


def alive(pid):
    """True while `pid` runs (a zombie is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
