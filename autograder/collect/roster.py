"""The roster CSV: students, and which of them a folder or file name names."""
import csv
import re

from .naming import nfc, student_id


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
        raw = nfc(row.get(key) or "")
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
        entry["fields"] += [nfc(v) for v in row.values() if isinstance(v, str) and nfc(v)]
        for name in ("first_name", "last_name", "email"):
            if name in columns and nfc(row.get(columns[name]) or ""):
                entry[name] = entry[name] or nfc(row[columns[name]])
        if lms_column and nfc(row.get(lms_column) or ""):
            entry["lms_user_id"] = entry["lms_user_id"] or nfc(row[lms_column])
        full = nfc(row.get(columns.get("student", ""), "") or "")  # Canvas: "Last, First"
        if "," in full and not (entry["first_name"] or entry["last_name"]):
            entry["last_name"], entry["first_name"] = (nfc(x) for x in full.split(",", 1))
    return students


def identifying_values(roster):
    """{value (casefolded): student}: each id, and the fields of 3+ characters that only one student has."""
    owners = {}
    for sid, entry in roster.items():
        for value in {v.casefold() for v in entry["fields"] if len(v) >= 3}:
            owners.setdefault(value, set()).add(sid)
    found = {v: s.pop() for v, s in owners.items() if len(s) == 1}
    found.update({sid.casefold(): sid for sid in roster})
    return found


def roster_match(text, identifying):
    """Students whose id or identifying field appears in `text` as a whole token (case-insensitive)."""
    low = nfc(text).casefold()
    flat = re.sub(r"[\s_]+", " ", low)
    hits = set()
    for value, sid in identifying.items():
        escaped = re.escape(re.sub(r"[\s_]+", " ", value))
        pattern = rf"(?<![^\W_]){escaped}(?![^\W_])"  # not inside a longer word or number
        if re.search(pattern, flat):
            hits.add(sid)
    return hits
