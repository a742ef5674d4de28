"""`collect`: put submissions, in the shapes instructors get them, into nbgrader's submitted/ layout.

Accepted (a folder, or a .zip of one; zips inside are opened too), mixed freely:
- nbgrader's exchange: `.../inbound/<student>+<lesson>+<timestamp>[+...]/<lesson>.ipynb`;
- nbgrader's own layout: `<student>/<lesson>/<file>.ipynb`;
- one folder per student: `<student>/<file>.ipynb` (also LMS folders like `Jane Doe_123_assignsubmission_file_`),
  under any number of wrapping folders shared by every file (`downloads/<student>/...`);
- loose files, when a roster CSV names the student: `doejane_123_02_bahdanau (1).ipynb`.

The lesson comes from the file name, by its name first and its number last: the lesson id
(`02_bahdanau_attention`), else its name (`bahdanau_attention`), else number and first word
(`02_bahdanau`), else a lone two-digit token (`02`); digits glued to letters (`user04`) are never
a lesson number, and a name that fits two lessons is reported, never guessed.

The student comes from the roster when one is given (a row matches when its student_id, or
any other field of three or more characters that no other row shares, appears in the
folder or file name); without a roster, from the student folder's name. Two folder names
that make the same student id (`student a`, `student_a`, `Student_A`) are two people:
both are placed, under `student_a` and `student_a_2`, and the collision is reported.

Two files for one student and lesson: the newer wins, by the exchange timestamp (or the
timestamp.txt of nbgrader's own layout), else by
the file's own time (a zip entry's stored time, never the time of extraction), else by
the download number a browser adds (`02_x (2).ipynb` is newer than `02_x (1).ipynb` and
`02_x.ipynb`). The losing file is listed with the reason, and the log says which was kept
and why. Every file is either placed or listed, with the reason, as not placed (a
problem: exit status 2) or skipped (system files: `__MACOSX/`, `.DS_Store`, Jupyter's
`.ipynb_checkpoints/`). A re-run is idempotent: an unchanged copy is left as it is,
and a copy older than the one already placed never replaces it.

Every student found (and every roster row) is entered in the gradebook, so `export` has a
row for them in every lesson; <course>/collect.json keeps what each run placed and why
the rest was not placed, for `export`'s summary.
"""
import contextlib
import csv
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import tempfile
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

JUNK_FOLDERS = {"__MACOSX": "macOS archive metadata (__MACOSX/)",
                ".ipynb_checkpoints": "Jupyter's autosave checkpoint (the notebook itself is collected)",
                "__pycache__": "Python byte code"}
JUNK_FILES = {".ds_store": "macOS folder settings", "thumbs.db": "Windows thumbnail cache",
              "desktop.ini": "Windows folder settings"}
MAX_NESTED_ZIP = 3                   # zips inside zips inside zips
MAX_FILE_BYTES = 100 * 2**20         # a notebook (or a zip inside the collection) bigger than this is not read
MAX_ARCHIVE_BYTES = 2 * 2**30        # uncompressed bytes read out of one zip, the zips inside it included
MAX_ENTRIES = 50_000                 # entries of one zip (the zips inside it included), or files of one folder
MAX_DEPTH = 64                       # folders inside folders
CHUNK = 1 << 20                      # bytes read at a time
NOT_OPENED = ": never followed or read"
SAME_TIME = timedelta(seconds=2)     # zip times have a 2-second resolution
DOS_EPOCH = datetime(1980, 1, 1)     # the time zip tools write when they know none
MANIFEST = "collect.json"


@dataclass
class Collected:
    placed: list = field(default_factory=list)     # (source, student, lesson, target path)
    problems: list = field(default_factory=list)   # (source, reason): not placed, needs the instructor
    skipped: list = field(default_factory=list)    # (source, reason): system files, nothing to place
    notes: list = field(default_factory=list)      # which duplicate was kept and why
    collisions: list = field(default_factory=list) # folder names that make one student id, kept apart
    students: list = field(default_factory=list)   # every student id entered in the gradebook


@dataclass
class Entry:
    """One file handed to collect: where it is in the collection, how to stream its bytes, its own time."""
    rel: PurePosixPath
    open: object                # () -> a binary stream (a context manager); read it through _chunks
    time: datetime = None       # aware (UTC), or None when unknown
    time_source: str = ""
    size: int = 0               # as the folder or the zip declares it
    budget: object = None       # the _Budget of the archive it comes from, or None for a file in a folder

    @property
    def shown(self):
        return _shown(self.rel)


def _nfc(text):
    return unicodedata.normalize("NFC", text).strip()


def student_id(text):
    """A safe nbgrader student id from a folder name: letters (any script), digits, . _ @ - only."""
    return re.sub(r"[^\w.@-]+", "_", _nfc(text)).strip("_.") or "unknown"


# ---------------------------------------------------------------- lessons and download numbers

def _contains(tokens, words):
    n = len(words)
    return any(tokens[i:i + n] == words for i in range(len(tokens) - n + 1))


def match_lesson(filename, lessons):
    """(lesson, None) for the lesson a file name is a copy of, or (None, reason).

    By the lesson's whole id first, then its name, then number and first word, digits last.
    'user04_Copy of 01_seq2seq_bottleneck (2).ipynb' -> 01_seq2seq_bottleneck, never lesson 04.
    """
    stem = _nfc(filename)
    if stem.casefold().endswith(".ipynb"):
        stem = stem[:-len(".ipynb")]
    words = [w for w in re.split(r"[^0-9a-z]+", stem.casefold()) if w]  # 'user04' stays one word
    parts = {lesson: [w for w in re.split(r"[^0-9a-z]+", lesson.casefold()) if w] for lesson in lessons}
    number = {lesson: p[0] for lesson, p in parts.items() if p and p[0].isdigit()}
    rules = [
        ("its id", lambda l: parts[l]),
        ("its name", lambda l: parts[l][1:] if l in number and len(parts[l]) > 1 else None),
        ("its number and first word", lambda l: parts[l][:2] if l in number and len(parts[l]) > 1 else None),
        ("its number", lambda l: [number[l]] if l in number else None),
    ]
    for how, pattern in rules:
        hits = [l for l in lessons if pattern(l) and _contains(words, pattern(l))]
        if len(hits) == 1:
            return hits[0], None
        if len(hits) > 1:
            return None, f"file name fits several lessons by {how}: {', '.join(hits)}"
    return None, f"file name matches no lesson ({', '.join(lessons)})"


def lesson_of(filename, lessons):
    """The lesson a file name is a copy of, or None. '02_x (1).ipynb', 'Copy of 02_x.ipynb' -> '02_x'."""
    return match_lesson(filename, lessons)[0]


def download_number(filename):
    """The number a browser adds to a repeated download: '02_x (2).ipynb' -> 2, '02_x-3.ipynb' -> 3, else 0."""
    stem = re.sub(r"\.ipynb$", "", _nfc(filename), flags=re.IGNORECASE).strip()
    found = re.search(r"\((\d{1,3})\)$", stem) or re.search(r"(?<=[A-Za-z])-(\d{1,2})$", stem)
    return int(found.group(1)) if found else 0


# ---------------------------------------------------------------- the roster

def read_roster(path):
    """{student_id: {'fields': [identifying values], 'first_name', 'last_name', 'email'}} from a roster CSV.

    The id column is student_id (or username, sis_login_id, id, email): a Canvas gradebook export
    works as a roster (SIS Login ID is the id, Canvas's ID its lms_user_id, Student "Last, First" its
    name). A student listed twice is one student.
    Two different ids that make the same safe id are an error.
    """
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    columns = {k.strip().lower().replace(" ", "_"): k for k in rows[0] if k}
    key = next((columns[c] for c in ("student_id", "username", "sis_login_id", "id", "email") if c in columns), None)
    canvas = "sis_login_id" in columns and "id" in columns  # Canvas's gradebook export: ID is Canvas's user id
    lms_column = columns.get("lms_user_id") or (columns["id"] if canvas and columns["id"] != key else None)
    if key is None:
        raise ValueError(f"roster {path}: needs a student_id column (found: {', '.join(rows[0])})")
    students, raw_ids = {}, {}
    for line, row in enumerate(rows, start=2):
        raw = _nfc(row.get(key) or "")
        if not raw:
            continue
        sid = student_id(raw)
        other = raw_ids.setdefault(sid.casefold(), (raw, line))
        if other[0] != raw:
            raise ValueError(f"roster {path}: '{other[0]}' (line {other[1]}) and '{raw}' (line {line}) "
                             f"both make the student id '{sid}': give them ids that differ in more than "
                             f"case, spaces and punctuation")
        sid = student_id(other[0])
        entry = students.setdefault(sid, dict(fields=[], first_name=None, last_name=None, email=None,
                                              lms_user_id=None))
        entry["fields"] += [_nfc(v) for v in row.values() if isinstance(v, str) and _nfc(v)]
        for name in ("first_name", "last_name", "email"):
            if name in columns and _nfc(row.get(columns[name]) or ""):
                entry[name] = entry[name] or _nfc(row[columns[name]])
        if lms_column and _nfc(row.get(lms_column) or ""):
            entry["lms_user_id"] = entry["lms_user_id"] or _nfc(row[lms_column])
        full = _nfc(row.get(columns.get("student", ""), "") or "")  # Canvas: "Last, First"
        if "," in full and not (entry["first_name"] or entry["last_name"]):
            entry["last_name"], entry["first_name"] = (_nfc(x) for x in full.split(",", 1))
    return students


def _identifying(roster):
    """{value (casefolded): student}: each id, and the fields of 3+ characters that only one student has."""
    owners = {}
    for sid, entry in roster.items():
        for value in {v.casefold() for v in entry["fields"] if len(v) >= 3}:
            owners.setdefault(value, set()).add(sid)
    found = {v: s.pop() for v, s in owners.items() if len(s) == 1}
    found.update({sid.casefold(): sid for sid in roster})
    return found


def _roster_match(text, identifying):
    """Students whose id or identifying field appears in `text` as a whole token (case-insensitive)."""
    low = _nfc(text).casefold()
    flat = re.sub(r"[\s_]+", " ", low)
    hits = set()
    for value, sid in identifying.items():
        escaped = re.escape(re.sub(r"[\s_]+", " ", value))
        pattern = rf"(?<![^\W_]){escaped}(?![^\W_])"  # not inside a longer word or number
        if re.search(pattern, flat):
            hits.add(sid)
    return hits


# ---------------------------------------------------------------- reading folders and zips
#
# Nothing is followed or read that is not a regular file inside the tree being collected: a folder is
# walked one component at a time from the root's file descriptor with O_NOFOLLOW, so a symbolic link
# (to a file or a folder, inside the tree or out of it), a named pipe, a socket or a device is listed
# as skipped with what it is, never opened. A file is opened with O_NOFOLLOW | O_NONBLOCK and must
# still be the regular file the walk saw (same device and inode). Zip entries are streamed in 1 MB
# chunks, never read whole: at most MAX_FILE_BYTES per entry, MAX_ARCHIVE_BYTES uncompressed and
# MAX_ENTRIES entries per archive (the zips inside it count toward it), and symbolic-link entries are
# refused; what is over a cap is listed with the reason.

class TooLarge(OSError):
    """A stream ran past its cap."""


@dataclass
class _Budget:
    """What one archive (the zips inside it included) may still give: uncompressed bytes and entries."""
    bytes: int = field(default_factory=lambda: MAX_ARCHIVE_BYTES)
    entries: int = field(default_factory=lambda: MAX_ENTRIES)


def _shown(text):
    """A name as it can be printed and stored in JSON: bytes that are not UTF-8 as \\xNN, a newline as \\n."""
    text = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _odd(text):
    return _shown(text) != str(text)


def _chunks(entry, limit=MAX_FILE_BYTES):
    """The entry's bytes in chunks; TooLarge past `limit` (or past its archive's budget)."""
    seen = 0
    with entry.open() as stream:
        while True:
            chunk = stream.read(CHUNK)
            if not chunk:
                return
            seen += len(chunk)
            if seen > limit:  # a zip entry never gives more than the size it declares (zipfile stops there)
                raise TooLarge(f"more than {limit // 2**20} MB")
            yield chunk


def _read_small(entry, limit):
    return b"".join(_chunks(entry, limit))


def _digest(entry):
    h = hashlib.sha256()
    for chunk in _chunks(entry):
        h.update(chunk)
    return h.hexdigest()


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


KINDS = [(stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (fifo)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")]


def _kind(mode):
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def _entries_of_zip(fileobj, prefix, depth, out, problems, skipped, budget, stack, name=None):
    label = _shown(name or prefix or "the zip")
    count = _zip_entry_count(fileobj)
    if count is not None and count > budget.entries:
        problems.append((label, f"a zip of {count} entries, more than the {MAX_ENTRIES} collect reads from one "
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
            skipped.append((_shown(rel), f"{_kind(mode)} in the zip{NOT_OPENED}"))
            continue
        if info.file_size > budget.bytes:
            problems.append((_shown(rel), f"not read: its zip holds more than {MAX_ARCHIVE_BYTES // 2**20} MB "
                                          f"uncompressed (unzip it and collect the folder)"))
            continue
        time, how = _zip_time(info)
        budget.bytes -= min(info.file_size, MAX_FILE_BYTES + 1)  # what reading it may cost, counted before
        entry = Entry(rel, (lambda info_=info: archive.open(info_)), time, how, info.file_size, budget)
        _add(entry, depth, out, problems, skipped, stack)


def _add(entry, depth, out, problems, skipped, stack):
    """An entry, or the entries of a zip inside the collection (a nested zip's files sit under its name)."""
    if entry.rel.suffix.casefold() == ".zip" and not _junk(entry.rel):
        if depth >= MAX_NESTED_ZIP:
            problems.append((entry.shown, f"a zip nested more than {MAX_NESTED_ZIP} deep: unzip it first"))
        elif entry.size > MAX_FILE_BYTES:
            problems.append((entry.shown, f"a zip of {entry.size // 2**20} MB (more than {MAX_FILE_BYTES // 2**20} "
                                          f"MB): unzip it first"))
        else:
            budget = entry.budget or _Budget()
            copy = stack.enter_context(tempfile.TemporaryFile(prefix="collect-"))  # on disk: never whole in memory
            try:
                for chunk in _chunks(entry):
                    copy.write(chunk)
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
                problems.append((entry.shown, f"a .zip that cannot be read: {e}"))
                return
            copy.seek(0)
            inside = entry.rel.with_suffix("")  # bob/work.zip holds bob/work/02_x.ipynb
            _entries_of_zip(copy, inside, depth + 1, out, problems, skipped, budget, stack, name=entry.rel)
        return
    out.append(entry)


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
            raise OSError(f"it changed while collect read it: now {_kind(now.st_mode)}")
        return os.fdopen(fd, "rb")
    return open_


def _walk(root_fd, parts, out, problems, skipped, stack, count):
    """Every regular file below the root folder; everything else listed as skipped with what it is."""
    if len(parts) > MAX_DEPTH:
        problems.append((_shown(PurePosixPath(*parts)), f"folders nested more than {MAX_DEPTH} deep: not read"))
        return
    try:
        fd = _open_dir(root_fd, parts)
    except OSError as e:
        problems.append((_shown(PurePosixPath(*parts)), f"a folder that cannot be opened: {e.strerror}"))
        return
    try:
        kinds = []
        for name in sorted(os.listdir(fd)):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                link = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
                kinds.append((name, st, link))
            except OSError as e:
                problems.append((_shown(PurePosixPath(*parts, name)), f"cannot be read: {e.strerror}"))
    finally:
        os.close(fd)
    files = [k for k in kinds if stat.S_ISREG(k[1].st_mode)]
    if len(files) > count[0]:
        problems.append((_shown(PurePosixPath(*parts)) or ".", f"{len(files)} files in this folder not read: the "
                                                              f"collection holds more than {MAX_ENTRIES} files"))
        kinds = [k for k in kinds if not stat.S_ISREG(k[1].st_mode)]
    for name, st, link in kinds:
        rel = PurePosixPath(*parts, name)
        if stat.S_ISDIR(st.st_mode):
            _walk(root_fd, (*parts, name), out, problems, skipped, stack, count)
        elif not stat.S_ISREG(st.st_mode):
            target = f" (to {_shown(link)})" if link is not None else ""
            skipped.append((_shown(rel), f"{_kind(st.st_mode)}{target}{NOT_OPENED}"))
        else:
            count[0] -= 1
            entry = Entry(rel, _file_opener(root_fd, (*parts, name), st),
                          datetime.fromtimestamp(st.st_mtime, timezone.utc), "file time", st.st_size)
            if entry.rel.suffix.casefold() == ".zip" and not _junk(entry.rel):
                _add(entry, 0, out, problems, skipped, stack)
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
        _walk(root_fd, (), out, problems, skipped, stack, [MAX_ENTRIES])
    elif source.is_file() and zipfile.is_zipfile(source):
        handle = stack.enter_context(open(source, "rb"))
        _entries_of_zip(handle, PurePosixPath(""), 1, out, problems, skipped, _Budget(), stack, name=source.name)
    else:
        raise FileNotFoundError(f"collect: {source} is neither a folder nor a zip file")
    return out, problems, skipped


def _junk(rel):
    """Why a path is a system file with nothing to place, or None."""
    for part in rel.parts[:-1]:
        if part in JUNK_FOLDERS:
            return JUNK_FOLDERS[part]
    if rel.name.startswith("._"):
        return "macOS resource fork (._ file)"
    return JUNK_FILES.get(rel.name.casefold())


def _exchange(rel):
    """(student, lesson, timestamp) for inbound/<student>+<lesson>+<timestamp>[+...]/..., else None."""
    for part in rel.parts[:-1]:
        bits = part.split("+")
        if len(bits) >= 3 and bits[0] and bits[1]:
            return bits[0], bits[1], bits[2]
    return None


def _parse_stamp(text):
    from dateutil import parser
    try:
        stamp = parser.parse(text)
    except (ValueError, OverflowError):
        return None
    return stamp.replace(tzinfo=timezone.utc) if stamp.tzinfo is None else stamp.astimezone(timezone.utc)


# ---------------------------------------------------------------- deciding

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
        return _parse_stamp(self.stamp) if self.stamp else self.entry.time

    @property
    def digest(self):
        """sha256 of its bytes, streamed (never whole in memory); None when they cannot be read (see error)."""
        if self._digest is None and self.error is None:
            try:
                self._digest = _digest(self.entry)
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
                self.error = f"cannot be read: {e}"
        return self._digest


def _describe_time(c):
    if c.stamp:
        return f"{c.stamp_source} {c.stamp}"
    if c.entry.time is None:
        return c.entry.time_source or "no known time"
    return f"{c.entry.time_source} {c.entry.time:%Y-%m-%d %H:%M:%S} UTC"


def _newer(a, b):
    """(winner, loser, why) of two files for one student and lesson."""
    if a.time and b.time and abs(a.time - b.time) > SAME_TIME:
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


def _strip_wrappers(candidates, lessons):
    """Student folder names, after dropping folders every file shares (`downloads/`) and lesson folders."""
    lesson_names = {l.casefold() for l in lessons}
    folders, layout = {}, {}
    for c in candidates:
        parts = c.entry.rel.parts[:-1]
        at = [i for i, p in enumerate(parts) if p.casefold() in lesson_names and i > 0]
        if at:  # nbgrader's layout: the student is the folder that holds the lesson folder
            layout[id(c)] = [parts[at[-1] - 1]]
        else:
            folders[id(c)] = [p for p in parts if p.casefold() not in lesson_names]  # a per-lesson download
    if not folders:
        return layout
    lists = list(folders.values())
    common = 0
    while all(len(f) > common for f in lists) and len({f[common] for f in lists}) == 1:
        common += 1
    keep = min(common, min(len(f) for f in lists) - 1) if lists else 0
    return {**{k: f[max(0, keep):] for k, f in folders.items()}, **layout}


def _assign_ids(raw_names, taken):
    """{raw folder name: student id}; names that make the same id get _2, _3: never merged. Also [(ids, message)]."""
    groups = {}
    for raw in sorted(raw_names):
        groups.setdefault(student_id(raw).casefold(), []).append(raw)
    ids, notes, used = {}, [], {t.casefold() for t in taken}
    for key, raws in sorted(groups.items()):
        raws.sort(key=lambda r: (r != student_id(r), r))  # a name that already is an id keeps it
        ids[raws[0]] = student_id(raws[0])
        for raw in raws[1:]:
            n = 2
            while f"{key}_{n}" in used or f"{key}_{n}" in groups:
                n += 1
            ids[raw] = f"{student_id(raw)}_{n}"
            used.add(f"{key}_{n}")
        if len(raws) > 1:
            quoted = ", ".join("'" + _shown(r) + "'" for r in raws)
            notes.append(f"student id collision: {quoted} make the same student id "
                         f"(ignoring case); kept apart as {', '.join(ids[r] for r in raws)}: rename the folders "
                         f"or use --roster to choose the ids")
    return ids, notes


# ---------------------------------------------------------------- collect

def collect(source, course_root, lessons, roster=None, log=print):
    """Place every submission under `source` (folder or .zip) into course_root/submitted/. Returns Collected."""
    with contextlib.ExitStack() as stack:  # zips (and copies of the zips inside them) stay open until the end
        return _collect(source, course_root, lessons, roster, log, stack)


def _collect(source, course_root, lessons, roster, log, stack):
    roster_students = read_roster(roster) if roster else {}
    entries, problems, skipped = read_collection(source, stack)
    course_root = Path(course_root)
    out = Collected(problems=list(problems), skipped=list(skipped))
    identifying = _identifying(roster_students)
    candidates = []
    lesson_names = {l.casefold() for l in lessons}
    stamps = {}
    for e in entries:  # nbgrader's own layout: submitted/<student>/<lesson>/timestamp.txt
        if e.rel.name == "timestamp.txt" and e.rel.parent.name.casefold() in lesson_names and e.size < 1000:
            try:
                stamps[e.rel.parent] = _read_small(e, 1000).decode("utf-8", "replace").strip()
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error):
                pass
    for entry in sorted(entries, key=lambda e: str(e.rel)):
        rel = entry.shown
        junk = _junk(entry.rel)
        exchange = _exchange(entry.rel)
        if junk:
            out.skipped.append((rel, junk))
        elif exchange and entry.rel.name == "timestamp.txt":
            out.skipped.append((rel, "nbgrader's exchange timestamp (the folder name holds the same time)"))
        elif entry.rel.parent in stamps and entry.rel.name == "timestamp.txt":
            out.skipped.append((rel, "nbgrader's submission timestamp (the time of the notebook beside it)"))
        elif entry.rel.suffix.casefold() != ".ipynb":
            out.problems.append((rel, "not a notebook (.ipynb)"))
        elif entry.size > MAX_FILE_BYTES:
            out.problems.append((rel, f"a notebook of {entry.size // 2**20} MB: larger than any submission "
                                      f"(at most {MAX_FILE_BYTES // 2**20} MB are read)"))
        elif exchange:
            lesson, reason = match_lesson(entry.rel.name, lessons)
            if exchange[1] not in lessons or lesson != exchange[1]:
                out.problems.append((rel, f"exchange folder names lesson '{_shown(exchange[1])}', file is "
                                          f"{lesson or 'no known lesson'}"))
                continue
            candidates.append(Candidate(entry, _nfc(exchange[0]), lesson, stamp=exchange[2]))
        else:
            candidates.append(Candidate(entry, None, None, download=download_number(entry.rel.name)))

    folders = _strip_wrappers([c for c in candidates if c.stamp is None], lessons)
    known = []
    for c in candidates:
        rel = c.entry.shown
        if c.stamp is None:  # not from the exchange: find the student, then the lesson
            if roster_students:
                texts = [*c.entry.rel.parts[:-1], c.entry.rel.name]
                for text in texts:
                    hits = _roster_match(text, identifying)
                    if hits:
                        break
                if len(hits) > 1:
                    out.problems.append((rel, f"matches several roster students: {', '.join(sorted(hits))}"))
                    continue
                if not hits:
                    out.problems.append((rel, "no roster student matches its folder or file name"))
                    continue
                c.raw_student = c.student = hits.pop()
            elif not folders[id(c)]:
                out.problems.append((rel, "a loose file: put it in a folder named after the student, or give --roster"))
                continue
            else:
                c.raw_student = _nfc(folders[id(c)][0])
        known.append(c)

    for c in known:
        if c.stamp is None and c.entry.rel.parent in stamps and _parse_stamp(stamps[c.entry.rel.parent]):
            c.stamp, c.stamp_source = stamps[c.entry.rel.parent], "nbgrader timestamp.txt"
    taken = set(roster_students)
    ids, collisions = _assign_ids({c.raw_student for c in known if c.student is None}, taken)
    out.collisions += collisions
    for c in known:
        c.student = c.student or ids[c.raw_student]
        if c.raw_student and _odd(c.raw_student):
            note = (f"the folder name '{_shown(c.raw_student)}' is not plain text (bytes that are not UTF-8, or a "
                    f"line break): placed as student {c.student}")
            if note not in out.notes:
                out.notes.append(note)
    students = sorted(set(roster_students) | {c.student for c in known})

    chosen = {}
    for c in known:
        if c.lesson is None:
            c.lesson, reason = match_lesson(c.entry.rel.name, lessons)
            if c.lesson is None:
                out.problems.append((c.entry.shown, f"{reason}; student {c.student}"))
                continue
        previous = chosen.get((c.student, c.lesson))
        if previous is None:
            chosen[(c.student, c.lesson)] = c
            continue
        win, lose, why = _newer(previous, c)
        chosen[(c.student, c.lesson)] = win
        out.problems.append((lose.entry.shown, f"older duplicate for {c.student}/{c.lesson}: kept "
                                               f"{win.entry.shown} ({why})"))
        out.notes.append(f"{c.student}/{c.lesson}: kept {win.entry.shown} over {lose.entry.shown}: {why}")

    manifest_path = course_root / MANIFEST
    manifest = _load_manifest(manifest_path, out)
    placed_before = manifest.setdefault("placed", {})
    for (student, lesson), c in sorted(chosen.items()):
        _place(c, course_root, placed_before, source, out, log)

    out.students = students
    _register(course_root, students, roster_students)
    runs = manifest.setdefault("runs", {})
    odd = {e.shown: os.fsencode(str(e.rel)).hex() for e in entries if _odd(e.rel)}
    runs[_shown(Path(source).resolve())] = dict(
        placed=[list(p) for p in out.placed], problems=[list(p) for p in out.problems],
        skipped=[list(p) for p in out.skipped], notes=out.notes, collisions=out.collisions, students=students,
        **({"raw_names": odd} if odd else {}))  # names that are not plain text: their exact bytes, in hex
    write_atomic(manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))

    for note in out.collisions + out.notes:
        log(f"NOTE {note}")
    for rel, reason in out.skipped:
        log(f"skipped {rel}: {reason}")
    for rel, reason in out.problems:
        log(f"NOT PLACED {rel}: {reason}")
    log(f"collect: {len(out.placed)} placed, {len(out.problems)} not placed, {len(out.skipped)} skipped (system "
        f"files, links, pipes, devices), {len(students)} student(s) in the gradebook")
    return out


def _load_manifest(path, out):
    """collect.json, or {} when there is none; one that cannot be read is kept aside, never a reason to stop."""
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
        if isinstance(manifest, dict):
            return manifest
        raise ValueError("not a JSON object")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        aside = path.with_name(f"{path.name}.unreadable-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}")
        os.replace(path, aside)
        out.notes.append(f"{path.name} could not be read ({type(e).__name__}: {str(e)[:100]}): kept as {aside.name}, "
                         f"and a new one started (earlier runs' 'not placed' lists are in it)")
        return {}


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


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _place(c, course_root, placed_before, source, out, log):
    """Write one chosen file to submitted/<student>/<lesson>/, unless the same or a newer copy is there.

    The copy is streamed to a temporary file and renamed over the old one: a crash leaves the old
    submission or the new one, never neither."""
    rel, key = c.entry.shown, f"{c.student}/{c.lesson}"
    folder = course_root / "submitted" / c.student / c.lesson
    target = folder / f"{c.lesson}.ipynb"
    digest = c.digest
    if digest is None:
        out.problems.append((rel, c.error))
        return
    before = placed_before.get(key)
    if target.exists() and _file_digest(target) == digest:
        out.placed.append((rel, c.student, c.lesson, str(target)))
        log(f"unchanged {rel} -> submitted/{key}/ (already there)")
        return
    if target.exists() and before and before.get("time") and c.time:
        old = datetime.fromisoformat(before["time"])
        if old - c.time > SAME_TIME:
            out.problems.append((rel, f"older than the copy already in submitted/{key}/ "
                                      f"(from {before['source']}, {old:%Y-%m-%d %H:%M:%S} UTC)"))
            return
    h = hashlib.sha256()
    try:
        write_atomic(target, b"", (h.update(chunk) or chunk for chunk in _chunks(c.entry)))
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
        out.problems.append((rel, f"cannot be read: {e}"))
        return
    stamp = c.stamp or (f"{c.time:%Y-%m-%d %H:%M:%S.%f} UTC" if c.time else None)
    if stamp:
        write_atomic(folder / "timestamp.txt", stamp.encode("utf-8"))
    for other in folder.iterdir():  # what an earlier copy left beside it
        if other.name not in (target.name, "timestamp.txt" if stamp else "") and not other.name.startswith("."):
            if other.is_dir() and not other.is_symlink():
                shutil.rmtree(other)
            else:
                other.unlink()
    placed_before[key] = dict(source=f"{_shown(source)}:{rel}", sha256=h.hexdigest(),
                              time=c.time.isoformat() if c.time else None)
    out.placed.append((rel, c.student, c.lesson, str(target)))
    log(f"placed {rel} -> submitted/{key}/" + (" (replacing a different copy)" if before else ""))


def _register(course_root, students, roster):
    """Enter every student in the gradebook: export then has a row for each in every lesson."""
    import warnings
    from nbgrader.api import Gradebook
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Gradebook(f"sqlite:///{Path(course_root).resolve() / 'gradebook.db'}") as gb:
            for sid in students:
                info = {k: v for k, v in roster.get(sid, {}).items() if k != "fields" and v}
                gb.update_or_create_student(sid, **info)


def not_placed_summary(course_root):
    """Markdown lines for export's summary: every file collect did not place, with the reason."""
    path = Path(course_root) / MANIFEST
    if not path.exists():
        return []
    try:
        runs = json.loads(path.read_bytes().decode("utf-8")).get("runs", {})
    except (OSError, ValueError, AttributeError) as e:
        return ["", "## Files collect did not place", "",
                f"- {MANIFEST} cannot be read ({type(e).__name__}): run `python -m autograder collect` again"]
    rows = [(source, rel, reason) for source, run in sorted(runs.items()) for rel, reason, *_ in run["problems"]]
    notes = [note for run in runs.values() for note in run.get("collisions", [])]
    lines = ["", f"## Files collect did not place ({len(rows)})", ""]
    lines += [f"- `{rel}` (in {source}): {reason}" for source, rel, reason in rows] or ["- none"]
    unopened = [(source, rel, reason) for source, run in sorted(runs.items()) for rel, reason, *_ in run["skipped"]
                if reason.endswith(NOT_OPENED)]
    if unopened:  # a submission that is a link (into solutions/, say) is there for a look, not a grade
        lines += ["", f"## Links, pipes and devices collect never opened ({len(unopened)})", ""]
        lines += [f"- `{rel}` (in {source}): {reason}" for source, rel, reason in unopened]
    if notes:
        lines += ["", "## Student id collisions", ""] + [f"- {n}" for n in notes]
    return lines
