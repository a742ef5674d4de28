"""A file of the collection: where it is, how its bytes are streamed within the caps, how its name is shown.

Also what is a system file with nothing to place (`__MACOSX/`, `.DS_Store`, checkpoints)."""
import hashlib
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath

from . import limits

JUNK_FOLDERS = {"__MACOSX": "macOS archive metadata (__MACOSX/)",
                ".ipynb_checkpoints": "Jupyter's autosave checkpoint (the notebook itself is collected)",
                "__pycache__": "Python byte code"}
JUNK_FILES = {".ds_store": "macOS folder settings", "thumbs.db": "Windows thumbnail cache",
              "desktop.ini": "Windows folder settings"}
NOT_OPENED = ": never followed or read"


@dataclass
class Entry:
    """One file handed to collect: where it is in the collection, how to stream its bytes, its own time."""
    rel: PurePosixPath
    open: object                # () -> a binary stream (a context manager); read it through chunks
    time: datetime = None       # aware (UTC), or None when unknown
    time_source: str = ""
    size: int = 0               # as the folder or the zip declares it
    budget: object = None       # the Budget of the archive it comes from, or None for a file in a folder

    @property
    def shown(self):
        return shown(self.rel)


class TooLarge(OSError):
    """A stream ran past its cap."""


@dataclass
class Budget:
    """What one archive (the zips inside it included) may still give: uncompressed bytes and entries."""
    bytes: int = field(default_factory=lambda: limits.MAX_ARCHIVE_BYTES)
    entries: int = field(default_factory=lambda: limits.MAX_ENTRIES)


def shown(text):
    """A name as it can be printed and stored in JSON: bytes that are not UTF-8 as \\xNN, a newline as \\n."""
    text = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def odd(text):
    return shown(text) != str(text)


def chunks(entry, limit=limits.MAX_FILE_BYTES):
    """The entry's bytes in chunks; TooLarge past `limit` (or past its archive's budget)."""
    seen = 0
    with entry.open() as stream:
        while True:
            chunk = stream.read(limits.CHUNK)
            if not chunk:
                return
            seen += len(chunk)
            if seen > limit:  # a zip entry never gives more than the size it declares (zipfile stops there)
                raise TooLarge(f"more than {limit // 2**20} MB")
            yield chunk


def read_small(entry, limit):
    return b"".join(chunks(entry, limit))


def entry_digest(entry):
    h = hashlib.sha256()
    for chunk in chunks(entry):
        h.update(chunk)
    return h.hexdigest()


KINDS = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (fifo)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")]


def kind(mode):
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def junk(rel):
    """Why a path is a system file with nothing to place, or None."""
    for part in rel.parts[:-1]:
        if part in JUNK_FOLDERS:
            return JUNK_FOLDERS[part]
    if rel.name.startswith("._"):
        return "macOS resource fork (._ file)"
    return JUNK_FILES.get(rel.name.casefold())
