"""Placing a chosen file into submitted/, collect.json (written atomically), the gradebook's students,
and export's summary of what was not placed."""
import hashlib
import json
import os
import shutil
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path

from ..course import step_folder, step_notebook
from ..files import write_atomic  # collect writes every file this way
from ..mdsafe import md_code
from . import limits
from .entries import NOT_OPENED, chunks, shown

MANIFEST = "collect.json"


def load_manifest(path, out):
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


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(limits.CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def place(c, course_root, placed_before, source, out, log):
    """Write one chosen file to submitted/<student>/<lesson>/, unless the same or a newer copy is there.

    The copy is streamed to a temporary file and renamed over the old one: a crash leaves the old
    submission or the new one, never neither."""
    rel, key = c.entry.shown, f"{c.student}/{c.lesson}"
    folder = step_folder(course_root, "submitted", c.lesson, c.student)
    target = step_notebook(course_root, "submitted", c.lesson, c.student)
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
        if old - c.time > limits.SAME_TIME:
            out.problems.append((rel, f"older than the copy already in submitted/{key}/ "
                                      f"(from {before['source']}, {old:%Y-%m-%d %H:%M:%S} UTC)"))
            return
    h = hashlib.sha256()
    try:
        write_atomic(target, b"", (h.update(chunk) or chunk for chunk in chunks(c.entry)))
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
    placed_before[key] = dict(source=f"{shown(source)}:{rel}", sha256=h.hexdigest(),
                              time=c.time.isoformat() if c.time else None)
    out.placed.append((rel, c.student, c.lesson, str(target)))
    log(f"placed {rel} -> submitted/{key}/" + (" (replacing a different copy)" if before else ""))


def register(course_root, students, roster):
    """Enter every student in the gradebook: export then has a row for each in every lesson."""
    import warnings
    from ..gradebook import open_gradebook
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_gradebook(course_root) as gb:
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
    lines += [f"- {md_code(rel)} (in {source}): {md_code(reason)}" for source, rel, reason in rows] or ["- none"]
    unopened = [(source, rel, reason) for source, run in sorted(runs.items()) for rel, reason, *_ in run["skipped"]
                if reason.endswith(NOT_OPENED)]
    if unopened:  # a submission that is a link (into solutions/, say) is there for a look, not a grade
        lines += ["", f"## Links, pipes and devices collect never opened ({len(unopened)})", ""]
        lines += [f"- {md_code(rel)} (in {source}): {md_code(reason)}" for source, rel, reason in unopened]
    if notes:
        lines += ["", "## Student id collisions", ""] + [f"- {md_code(n)}" for n in notes]
    return lines
