"""Zips, and zips inside the collection: entries streamed, never read whole, within one archive's budget.

At most MAX_FILE_BYTES per entry, MAX_ARCHIVE_BYTES uncompressed and MAX_ENTRIES entries per archive
(the zips inside it count toward it), MAX_NESTED_ZIP deep; symbolic-link entries are refused; what is
over a cap is listed with the reason."""
import stat
import struct
import tempfile
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import PurePosixPath

from . import limits
from .entries import NOT_OPENED, Budget, Entry, chunks, junk, kind, shown

DOS_EPOCH = datetime(1980, 1, 1)     # the time zip tools write when they know none


def _zip_name(info):
    """The entry's name: zips without the UTF-8 flag are read as cp437 by Python, but most tools wrote UTF-8."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def _zip_time(info):
    """(aware time, how it is known) of a zip entry: the UTC time of the extended-timestamp field, else its local time."""
    extra = info.extra
    while len(extra) >= 4:
        kind, size = struct.unpack("<HH", extra[:4])
        body, extra = extra[4:4 + size], extra[4 + size:]
        if kind == 0x5455 and len(body) >= 5 and body[0] & 1:
            return datetime.fromtimestamp(struct.unpack("<i", body[1:5])[0], timezone.utc), "zip entry time (UTC)"
    stamp = datetime(*info.date_time)
    if stamp <= DOS_EPOCH:
        return None, "no time stored in the zip"
    return stamp.astimezone(timezone.utc), "zip entry time"


def _zip_entry_count(fileobj):
    """The number of entries a zip's end record declares, read before its directory is loaded (or None)."""
    try:
        record = zipfile._EndRecData(fileobj)  # noqa: SLF001: the standard library's own reader of that record
    except OSError:
        return None
    return record[zipfile._ECD_ENTRIES_TOTAL] if record else None  # noqa: SLF001


def entries_of_zip(fileobj, prefix, depth, out, problems, skipped, budget, stack, name=None):
    label = shown(name or prefix or "the zip")
    count = _zip_entry_count(fileobj)
    if count is not None and count > budget.entries:
        problems.append((label, f"a zip of {count} entries, more than the {limits.MAX_ENTRIES} collect reads from one "
                                f"archive: not read (unzip it, or split it)"))
        return
    try:
        archive = stack.enter_context(zipfile.ZipFile(fileobj))
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as e:
        problems.append((label, f"a .zip that cannot be read: {e}"))
        return
    for info in archive.infolist():
        budget.entries -= 1
        if info.is_dir():
            continue
        parts = [p for p in PurePosixPath(_zip_name(info).replace("\\", "/")).parts if p not in ("", ".", "..", "/")]
        rel = PurePosixPath(str(prefix), *parts) if str(prefix) else PurePosixPath(*parts)
        mode = info.external_attr >> 16
        if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # a Unix file type in the entry's attributes
            skipped.append((shown(rel), f"{kind(mode)} in the zip{NOT_OPENED}"))
            continue
        if info.file_size > budget.bytes:
            problems.append((shown(rel), f"not read: its zip holds more than {limits.MAX_ARCHIVE_BYTES // 2**20} MB "
                                          f"uncompressed (unzip it and collect the folder)"))
            continue
        time, how = _zip_time(info)
        budget.bytes -= min(info.file_size, limits.MAX_FILE_BYTES + 1)  # what reading it may cost, counted before
        entry = Entry(rel, (lambda info_=info: archive.open(info_)), time, how, info.file_size, budget)
        add_entry(entry, depth, out, problems, skipped, stack)


def add_entry(entry, depth, out, problems, skipped, stack):
    """An entry, or the entries of a zip inside the collection (a nested zip's files sit under its name)."""
    if entry.rel.suffix.casefold() == ".zip" and not junk(entry.rel):
        if depth >= limits.MAX_NESTED_ZIP:
            problems.append((entry.shown, f"a zip nested more than {limits.MAX_NESTED_ZIP} deep: unzip it first"))
        elif entry.size > limits.MAX_FILE_BYTES:
            problems.append((entry.shown, f"a zip of {entry.size // 2**20} MB (more than {limits.MAX_FILE_BYTES // 2**20} "
                                          f"MB): unzip it first"))
        else:
            budget = entry.budget or Budget()
            copy = stack.enter_context(tempfile.TemporaryFile(prefix="collect-"))  # on disk: never whole in memory
            try:
                for chunk in chunks(entry):
                    copy.write(chunk)
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
                problems.append((entry.shown, f"a .zip that cannot be read: {e}"))
                return
            copy.seek(0)
            inside = entry.rel.with_suffix("")  # bob/work.zip holds bob/work/02_x.ipynb
            entries_of_zip(copy, inside, depth + 1, out, problems, skipped, budget, stack, name=entry.rel)
        return
    out.append(entry)
