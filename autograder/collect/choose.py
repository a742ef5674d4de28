"""Two files for one student and lesson: which is newer, and why."""
import zipfile
import zlib
from dataclasses import dataclass

from . import limits
from .entries import Entry, entry_digest
from .naming import parse_stamp


@dataclass
class Candidate:
    entry: Entry
    raw_student: str        # the folder name, exchange name or roster id it came from
    lesson: str
    download: int = 0
    stamp: str = None       # exchange timestamp (or nbgrader's timestamp.txt) as written, or None
    stamp_source: str = "exchange timestamp"
    student: str = None     # the id it is placed under
    _digest: str = None
    error: str = None       # why its bytes could not be read (too large, a broken zip entry)

    @property
    def time(self):
        return parse_stamp(self.stamp) if self.stamp else self.entry.time

    @property
    def digest(self):
        """sha256 of its bytes, streamed (never whole in memory); None when they cannot be read (see error)."""
        if self._digest is None and self.error is None:
            try:
                self._digest = entry_digest(self.entry)
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
                self.error = f"cannot be read: {e}"
        return self._digest


def _describe_time(c):
    if c.stamp:
        return f"{c.stamp_source} {c.stamp}"
    if c.entry.time is None:
        return c.entry.time_source or "no known time"
    return f"{c.entry.time_source} {c.entry.time:%Y-%m-%d %H:%M:%S} UTC"


def newer(a, b):
    """(winner, loser, why) of two files for one student and lesson."""
    if a.time and b.time and abs(a.time - b.time) > limits.SAME_TIME:
        win, lose = (a, b) if a.time > b.time else (b, a)
        return win, lose, f"newer: {_describe_time(win)}, against {_describe_time(lose)}"
    if a.download != b.download:
        win, lose = (a, b) if a.download > b.download else (b, a)
        number = lambda c: f"({c.download})" if c.download else "no number"  # noqa: E731
        same = "same time" if a.time and b.time else "time unknown"
        return win, lose, f"{same}; a later download: {number(win)}, against {number(lose)}"
    win, lose = sorted([a, b], key=lambda c: str(c.entry.rel))[::-1]
    if a.digest is not None and a.digest == b.digest:
        return win, lose, "an identical copy"
    return win, lose, ("CANNOT TELL which is newer (same time, same download number): kept the one last "
                       "in name order; check by hand")
