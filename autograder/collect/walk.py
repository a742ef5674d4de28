"""Reading a folder (or a zip) into entries, following nothing.

Nothing is followed or read that is not a regular file inside the tree being collected: a folder is
walked one component at a time from the root's file descriptor with O_NOFOLLOW, so a symbolic link
(to a file or a folder, inside the tree or out of it), a named pipe, a socket or a device is listed
as skipped with what it is, never opened. A file is opened with O_NOFOLLOW | O_NONBLOCK and must
still be the regular file the walk saw (same device and inode). Zips found on the way are opened by
`archive`.
"""
import contextlib
import os
import stat
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from . import limits
from .archive import add_entry, entries_of_zip
from .entries import NOT_OPENED, Budget, Entry, junk, kind, shown


def _open_dir(root_fd, parts):
    """A folder below the root, opened one component at a time, never through a symbolic link."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _file_opener(root_fd, parts, seen):
    """() -> the regular file `parts` below the root, as the walk saw it (never a link, a pipe or a device)."""
    def open_():
        folder = _open_dir(root_fd, parts[:-1])
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        finally:
            os.close(folder)
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            os.close(fd)
            raise OSError(f"it changed while collect read it: now {kind(now.st_mode)}")
        return os.fdopen(fd, "rb")
    return open_


def _walk(root_fd, parts, out, problems, skipped, stack, count):
    """Every regular file below the root folder; everything else listed as skipped with what it is."""
    if len(parts) > limits.MAX_DEPTH:
        problems.append((shown(PurePosixPath(*parts)), f"folders nested more than {limits.MAX_DEPTH} deep: not read"))
        return
    try:
        fd = _open_dir(root_fd, parts)
    except OSError as e:
        problems.append((shown(PurePosixPath(*parts)), f"a folder that cannot be opened: {e.strerror}"))
        return
    try:
        kinds = []
        for name in sorted(os.listdir(fd)):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                link = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
                kinds.append((name, st, link))
            except OSError as e:
                problems.append((shown(PurePosixPath(*parts, name)), f"cannot be read: {e.strerror}"))
    finally:
        os.close(fd)
    files = [k for k in kinds if stat.S_ISREG(k[1].st_mode)]
    if len(files) > count[0]:
        problems.append((shown(PurePosixPath(*parts)) or ".", f"{len(files)} files in this folder not read: the "
                                                              f"collection holds more than {limits.MAX_ENTRIES} files"))
        kinds = [k for k in kinds if not stat.S_ISREG(k[1].st_mode)]
    for name, st, link in kinds:
        rel = PurePosixPath(*parts, name)
        if stat.S_ISDIR(st.st_mode):
            _walk(root_fd, (*parts, name), out, problems, skipped, stack, count)
        elif not stat.S_ISREG(st.st_mode):
            target = f" (to {shown(link)})" if link is not None else ""
            skipped.append((shown(rel), f"{kind(st.st_mode)}{target}{NOT_OPENED}"))
        else:
            count[0] -= 1
            entry = Entry(rel, _file_opener(root_fd, (*parts, name), st),
                          datetime.fromtimestamp(st.st_mtime, timezone.utc), "file time", st.st_size)
            if entry.rel.suffix.casefold() == ".zip" and not junk(entry.rel):
                add_entry(entry, 0, out, problems, skipped, stack)
            else:
                out.append(entry)


def read_collection(source, stack=None):
    """([Entry], [(source, problem)], [(source, why skipped)]) for every file in a folder or zip, zips inside
    opened. Entries are read lazily: keep `stack` (a contextlib.ExitStack) open while they are used."""
    source = Path(source)
    stack = stack if stack is not None else contextlib.ExitStack()
    out, problems, skipped = [], [], []
    if source.is_dir():
        root_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        stack.callback(os.close, root_fd)
        _walk(root_fd, (), out, problems, skipped, stack, [limits.MAX_ENTRIES])
    elif source.is_file() and zipfile.is_zipfile(source):
        handle = stack.enter_context(open(source, "rb"))
        entries_of_zip(handle, PurePosixPath(""), 1, out, problems, skipped, Budget(), stack, name=source.name)
    else:
        raise FileNotFoundError(f"collect: {source} is neither a folder nor a zip file")
    return out, problems, skipped
