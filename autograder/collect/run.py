"""One collect run: read the collection, find each file's student and lesson, choose between copies,
place them, and record the run in collect.json (see the package's docstring for the rules)."""
import contextlib
import json
import os
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from . import limits
from .choose import Candidate, newer
from .entries import junk, odd, read_small, shown
from .naming import assign_ids, download_number, exchange_parts, match_lesson, nfc, parse_stamp, strip_wrappers
from ..files import write_atomic
from .place import MANIFEST, load_manifest, place, register
from .roster import identifying_values, read_roster, roster_match
from .walk import read_collection


@dataclass
class Collected:
    placed: list = field(default_factory=list)     # (source, student, lesson, target path)
    problems: list = field(default_factory=list)   # (source, reason): not placed, needs the instructor
    skipped: list = field(default_factory=list)    # (source, reason): system files, nothing to place
    notes: list = field(default_factory=list)      # which duplicate was kept and why
    collisions: list = field(default_factory=list) # folder names that make one student id, kept apart
    students: list = field(default_factory=list)   # every student id entered in the gradebook


def collect(source, course_root, lessons, roster=None, log=print):
    """Place every submission under `source` (folder or .zip) into course_root/submitted/. Returns Collected."""
    with contextlib.ExitStack() as stack:  # zips (and copies of the zips inside them) stay open until the end
        return _collect(source, course_root, lessons, roster, log, stack)


def _collect(source, course_root, lessons, roster, log, stack):
    roster_students = read_roster(roster) if roster else {}
    entries, problems, skipped = read_collection(source, stack)
    course_root = Path(course_root)
    out = Collected(problems=list(problems), skipped=list(skipped))
    stamps = _timestamps(entries, lessons)
    candidates = _sort(entries, stamps, lessons, out)
    known = _whose(candidates, lessons, roster_students, out)
    students = _name_students(known, stamps, roster_students, out)
    chosen = _choose(known, lessons, out)
    _record(source, course_root, entries, chosen, students, roster_students, out, log)
    _log(out, students, log)
    return out


def _timestamps(entries, lessons):
    """{folder: text} of nbgrader's own layout: submitted/<student>/<lesson>/timestamp.txt."""
    lesson_names = {l.casefold() for l in lessons}
    stamps = {}
    for e in entries:
        if e.rel.name == "timestamp.txt" and e.rel.parent.name.casefold() in lesson_names and e.size < 1000:
            try:
                stamps[e.rel.parent] = read_small(e, 1000).decode("utf-8", "replace").strip()
            except (OSError, zipfile.BadZipFile, EOFError, zlib.error):
                pass
    return stamps


def _sort(entries, stamps, lessons, out):
    """Candidates: every notebook that may be placed; the rest skipped or listed as a problem."""
    candidates = []
    for entry in sorted(entries, key=lambda e: str(e.rel)):
        rel = entry.shown
        system = junk(entry.rel)
        exchange = exchange_parts(entry.rel)
        if system:
            out.skipped.append((rel, system))
        elif exchange and entry.rel.name == "timestamp.txt":
            out.skipped.append((rel, "nbgrader's exchange timestamp (the folder name holds the same time)"))
        elif entry.rel.parent in stamps and entry.rel.name == "timestamp.txt":
            out.skipped.append((rel, "nbgrader's submission timestamp (the time of the notebook beside it)"))
        elif entry.rel.suffix.casefold() != ".ipynb":
            out.problems.append((rel, "not a notebook (.ipynb)"))
        elif entry.size > limits.MAX_FILE_BYTES:
            out.problems.append((rel, f"a notebook of {entry.size // 2**20} MB: larger than any submission "
                                      f"(at most {limits.MAX_FILE_BYTES // 2**20} MB are read)"))
        elif exchange:
            lesson, reason = match_lesson(entry.rel.name, lessons)
            if exchange[1] not in lessons or lesson != exchange[1]:
                out.problems.append((rel, f"exchange folder names lesson '{shown(exchange[1])}', file is "
                                          f"{lesson or 'no known lesson'}"))
                continue
            candidates.append(Candidate(entry, nfc(exchange[0]), lesson, stamp=exchange[2]))
        else:
            candidates.append(Candidate(entry, None, None, download=download_number(entry.rel.name)))
    return candidates


def _whose(candidates, lessons, roster_students, out):
    """The candidates whose student is known: from the exchange, the roster, or the student folder."""
    identifying = identifying_values(roster_students)
    folders = strip_wrappers([c for c in candidates if c.stamp is None], lessons)
    known = []
    for c in candidates:
        rel = c.entry.shown
        if c.stamp is None:  # not from the exchange: find the student, then the lesson
            if roster_students:
                texts = [*c.entry.rel.parts[:-1], c.entry.rel.name]
                for text in texts:
                    hits = roster_match(text, identifying)
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
                c.raw_student = nfc(folders[id(c)][0])
        known.append(c)
    return known


def _name_students(known, stamps, roster_students, out):
    """Give each known candidate its student id (colliding names kept apart) and time; every student's id."""
    for c in known:
        if c.stamp is None and c.entry.rel.parent in stamps and parse_stamp(stamps[c.entry.rel.parent]):
            c.stamp, c.stamp_source = stamps[c.entry.rel.parent], "nbgrader timestamp.txt"
    taken = set(roster_students)
    ids, collisions = assign_ids({c.raw_student for c in known if c.student is None}, taken)
    out.collisions += collisions
    for c in known:
        c.student = c.student or ids[c.raw_student]
        if c.raw_student and odd(c.raw_student):
            note = (f"the folder name '{shown(c.raw_student)}' is not plain text (bytes that are not UTF-8, or a "
                    f"line break): placed as student {c.student}")
            if note not in out.notes:
                out.notes.append(note)
    return sorted(set(roster_students) | {c.student for c in known})


def _choose(known, lessons, out):
    """{(student, lesson): the copy to place}; the older copies listed with the reason."""
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
        win, lose, why = newer(previous, c)
        chosen[(c.student, c.lesson)] = win
        out.problems.append((lose.entry.shown, f"older duplicate for {c.student}/{c.lesson}: kept "
                                               f"{win.entry.shown} ({why})"))
        out.notes.append(f"{c.student}/{c.lesson}: kept {win.entry.shown} over {lose.entry.shown}: {why}")
    return chosen


def _record(source, course_root, entries, chosen, students, roster_students, out, log):
    """Place the chosen copies, enter every student in the gradebook, and write this run into collect.json."""
    manifest_path = course_root / MANIFEST
    manifest = load_manifest(manifest_path, out)
    placed_before = manifest.setdefault("placed", {})
    for (student, lesson), c in sorted(chosen.items()):
        place(c, course_root, placed_before, source, out, log)

    out.students = students
    register(course_root, students, roster_students)
    runs = manifest.setdefault("runs", {})
    raw = {e.shown: os.fsencode(str(e.rel)).hex() for e in entries if odd(e.rel)}
    runs[shown(Path(source).resolve())] = dict(
        placed=[list(p) for p in out.placed], problems=[list(p) for p in out.problems],
        skipped=[list(p) for p in out.skipped], notes=out.notes, collisions=out.collisions, students=students,
        **({"raw_names": raw} if raw else {}))  # names that are not plain text: their exact bytes, in hex
    write_atomic(manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8"))


def _log(out, students, log):
    for note in out.collisions + out.notes:
        log(f"NOTE {note}")
    for rel, reason in out.skipped:
        log(f"skipped {rel}: {reason}")
    for rel, reason in out.problems:
        log(f"NOT PLACED {rel}: {reason}")
    log(f"collect: {len(out.placed)} placed, {len(out.problems)} not placed, {len(out.skipped)} skipped (system "
        f"files, links, pipes, devices), {len(students)} student(s) in the gradebook")
