"""Names: a safe student id, the lesson a file name is a copy of, download numbers, exchange folder names,
timestamps, wrapping folders, and student ids that collide."""
import re
import unicodedata
from datetime import timezone

from .entries import shown


def nfc(text):
    return unicodedata.normalize("NFC", text).strip()


def student_id(text):
    """A safe nbgrader student id from a folder name: letters (any script), digits, . _ @ - only."""
    return re.sub(r"[^\w.@-]+", "_", nfc(text)).strip("_.") or "unknown"


def _contains(tokens, words):
    n = len(words)
    return any(tokens[i:i + n] == words for i in range(len(tokens) - n + 1))


def match_lesson(filename, lessons):
    """(lesson, None) for the lesson a file name is a copy of, or (None, reason).

    By the lesson's whole id first, then its name, then number and first word, digits last.
    'user04_Copy of 01_seq2seq_bottleneck (2).ipynb' -> 01_seq2seq_bottleneck, never lesson 04.
    """
    stem = nfc(filename)
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


def download_number(filename):
    """The number a browser adds to a repeated download: '02_x (2).ipynb' -> 2, '02_x-3.ipynb' -> 3, else 0."""
    stem = re.sub(r"\.ipynb$", "", nfc(filename), flags=re.IGNORECASE).strip()
    found = re.search(r"\((\d{1,3})\)$", stem) or re.search(r"(?<=[A-Za-z])-(\d{1,2})$", stem)
    return int(found.group(1)) if found else 0


def exchange_parts(rel):
    """(student, lesson, timestamp) for inbound/<student>+<lesson>+<timestamp>[+...]/..., else None."""
    for part in rel.parts[:-1]:
        bits = part.split("+")
        if len(bits) >= 3 and bits[0] and bits[1]:
            return bits[0], bits[1], bits[2]
    return None


def parse_stamp(text):
    from dateutil import parser
    try:
        stamp = parser.parse(text)
    except (ValueError, OverflowError):
        return None
    return stamp.replace(tzinfo=timezone.utc) if stamp.tzinfo is None else stamp.astimezone(timezone.utc)


def strip_wrappers(candidates, lessons):
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


def assign_ids(raw_names, taken):
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
            quoted = ", ".join("'" + shown(r) + "'" for r in raws)
            notes.append(f"student id collision: {quoted} make the same student id "
                         f"(ignoring case); kept apart as {', '.join(ids[r] for r in raws)}: rename the folders "
                         f"or use --roster to choose the ids")
    return ids, notes
