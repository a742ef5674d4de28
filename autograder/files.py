"""Files written so that a crash leaves the old one or the new one, whole (standard library only)."""
import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path, data, chunks=()):
    """Write `data` (then each of `chunks`) to `path` so that a crash leaves the old file or the new one, whole.

    A temporary file in the same folder is written, flushed to disk (fsync) and renamed over `path`
    (os.replace is atomic on POSIX); the folder is synced so that the rename itself survives a crash.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
