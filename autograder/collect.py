"""`collect`: put submissions, in the shapes instructors get them, into nbgrader's submitted/ layout.

Accepted (a folder, or a .zip of one), mixed freely:
- nbgrader's exchange: `.../inbound/<student>+<lesson>+<timestamp>[+...]/<lesson>.ipynb` (latest wins);
- nbgrader's own layout: `<student>/<lesson>/<file>.ipynb`;
- one folder per student: `<student>/<file>.ipynb` (also LMS folders like `Jane Doe_123_assignsubmission_file_`);
- loose files, when a roster CSV names the student: `doejane_123_02_bahdanau (1).ipynb`.

The lesson comes from the file name after removing what Colab, browsers and LMSs add
(`Copy of `, ` (1)`, `-1`): `Copy of 02_bahdanau_attention (1).ipynb` is lesson 02. The student
comes from the roster when one is given: a row matches when its student_id, or any other
of its fields (name, email, LMS id), appears in the folder or file name; without a roster,
from the folder name. Every file that is not placed is reported with the reason.
"""
import csv
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

SKIP_PARTS = {"__MACOSX", ".ipynb_checkpoints", ".DS_Store"}
DECORATIONS = [r"^copy of\s+", r"\s*\(\d+\)$", r"\s+copy$", r"-\d+$", r"_\d+$"]


@dataclass
class Collected:
    placed: list = field(default_factory=list)     # (source path, student, lesson, target path)
    problems: list = field(default_factory=list)   # (source path, reason)


def student_id(text):
    """A safe nbgrader student id from a folder name: letters, digits, . _ @ - only."""
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text.strip()).strip("_") or "unknown"


def lesson_of(filename, lessons):
    """The lesson a file name is a copy of, or None. '02_x (1).ipynb', 'Copy of 02_x.ipynb' -> '02_x'."""
    stem = Path(filename).stem.strip()
    if stem in lessons:
        return stem
    for pattern in DECORATIONS:
        stem = re.sub(pattern, "", stem, flags=re.IGNORECASE).strip()
        if stem in lessons:
            return stem
    number = re.search(r"(?:^|[^0-9])(\d\d)_", Path(filename).stem)
    candidates = [l for l in lessons if number and l.startswith(number.group(1) + "_")]
    return candidates[0] if len(candidates) == 1 else None


def read_roster(path):
    """[(student_id, [other fields])] from a CSV with a student_id column (or id, username, email)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    key = next((k for k in rows[0] if k and k.strip().lower() in ("student_id", "id", "username", "email")), None)
    if key is None:
        raise ValueError(f"roster {path}: needs a student_id column (found: {', '.join(rows[0])})")
    return [(row[key].strip(), [v.strip() for k, v in row.items() if v and v.strip()]) for row in rows
            if row[key] and row[key].strip()]


def _roster_match(text, roster):
    """Students whose id or other field appears in `text` as a whole token (case-insensitive)."""
    low = text.lower()
    hits = set()
    for sid, fields in roster:
        for value in fields:
            if re.search(rf"(?<![a-z0-9]){re.escape(value.lower())}(?![a-z0-9])", low):
                hits.add(sid)
    return hits


def _exchange(rel):
    """(student, lesson, timestamp) for inbound/<student>+<lesson>+<timestamp>/..., else None."""
    for part in rel.parts[:-1]:
        bits = part.split("+")
        if len(bits) >= 3:
            return bits[0], bits[1], bits[2]
    return None


def _student_for(rel, roster):
    """(student, reason when none) from a path relative to the collection root."""
    folders = [p for p in rel.parts[:-1]]
    if roster:
        for text in folders + [rel.name]:
            hits = _roster_match(text, roster)
            if len(hits) == 1:
                return hits.pop(), None
            if len(hits) > 1:
                return None, f"matches several roster students: {', '.join(sorted(hits))}"
        return None, "no roster student matches its folder or file name"
    if not folders:
        return None, "a loose file: put it in a folder named after the student, or give --roster"
    return student_id(folders[0]), None


def collect(source, course_root, lessons, roster=None, log=print):
    """Place every submission under `source` (folder or .zip) into course_root/submitted/. Returns Collected."""
    source = Path(source)
    with tempfile.TemporaryDirectory() as tmp:
        if source.is_file() and zipfile.is_zipfile(source):
            with zipfile.ZipFile(source) as z:
                z.extractall(tmp)
            root = Path(tmp)
        elif source.is_dir():
            root = source
        else:
            raise FileNotFoundError(f"collect: {source} is neither a folder nor a zip file")
        return _collect_tree(root, Path(course_root), lessons, read_roster(roster) if roster else [], log)


def _collect_tree(root, course_root, lessons, roster, log):
    out = Collected()
    chosen = {}  # (student, lesson) -> (sort key, path, rel, timestamp)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if SKIP_PARTS & set(rel.parts) or rel.name.startswith("._"):
            continue
        if path.suffix != ".ipynb":
            out.problems.append((str(rel), "not a notebook (.ipynb)"))
            continue
        exchange = _exchange(rel)
        if exchange:
            student, lesson, stamp = student_id(exchange[0]), exchange[1], exchange[2]
            if lesson not in lessons or lesson_of(rel.name, lessons) != lesson:
                out.problems.append((str(rel), f"exchange folder names lesson {lesson!r}, file is "
                                               f"{lesson_of(rel.name, lessons) or 'no known lesson'}"))
                continue
            key, timestamp = stamp, stamp
        else:
            lesson = lesson_of(rel.name, lessons)
            if lesson is None:
                out.problems.append((str(rel), f"file name matches no lesson ({', '.join(lessons)})"))
                continue
            student, reason = _student_for(rel, roster)
            if student is None:
                out.problems.append((str(rel), reason))
                continue
            mtime = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
            key, timestamp = mtime.isoformat(), mtime.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        previous = chosen.get((student, lesson))
        if previous and previous[0] >= key:
            out.problems.append((str(rel), f"older duplicate for {student}/{lesson}; kept {previous[2]}"))
            continue
        if previous:
            out.problems.append((str(previous[2]), f"older duplicate for {student}/{lesson}; kept {rel}"))
        chosen[(student, lesson)] = (key, path, rel, timestamp)
    for (student, lesson), (_, path, rel, timestamp) in sorted(chosen.items()):
        folder = course_root / "submitted" / student / lesson
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        target = folder / f"{lesson}.ipynb"
        shutil.copyfile(path, target)
        (folder / "timestamp.txt").write_text(timestamp)
        out.placed.append((str(rel), student, lesson, str(target)))
        log(f"placed {rel} -> submitted/{student}/{lesson}/")
    for rel, reason in out.problems:
        log(f"NOT PLACED {rel}: {reason}")
    log(f"collect: {len(out.placed)} placed, {len(out.problems)} not placed")
    return out
