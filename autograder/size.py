"""Size limits for a submitted notebook: refuse or trim an absurd one before grading, and say so.

A notebook is checked as plain JSON, before nbformat reads and validates it (that alone took
16 s for a lesson with 100,000 one-line cells added, and grading then ran past the worker's hard
limit and scored 0). The rule:

1. More than MAX_NOTEBOOK_BYTES (100 MB, collect's cap too): not graded. check() raises
   ValueError("size: ..."), which `grade` enters as an `invalid:` submission (zero, flagged).
2. Otherwise it is graded, trimmed first where it is over a limit, with a `size:` flag that says
   what was left out:
   * more than MAX_CELLS cells (500; a lesson has at most about 60): every cell of the released
     lesson is kept (matched as restore.py matches them: cell id, grade_id, content, position), and
     of the cells the student added, the first ones, up to MAX_CELLS cells in all; the rest are
     dropped. Answers and tests are all kept, so what the student answered is graded;
   * a code cell of more than MAX_SOURCE_BYTES (1 MB) of source: its source is replaced by a
     comment saying so (that cell's exercise fails; the rest of the notebook does not);
   * more than MAX_OUTPUT_BYTES (20 MB) of saved outputs: every output is removed (nbgrader clears
     them before it runs the notebook anyway).
   The trimmed notebook replaces submitted/<student>/<lesson>/<lesson>.ipynb (written atomically),
   and the original is kept outside what the kernel can see, in the submission's `trimmed` folder
   (course.SubmissionPaths: trimmed/<student>/<lesson>/), with trim.json beside it: grading the trimmed
   notebook again gives the same flag. A notebook that is not JSON is left to the notebook check.

Plain `nbgrader autograde` does not apply these limits.
"""
import hashlib
import json

from .job import Finding

MAX_NOTEBOOK_BYTES = 100 * 2**20
MAX_CELLS = 500
MAX_SOURCE_BYTES = 2**20
MAX_OUTPUT_BYTES = 20 * 2**20


def _text(source):
    return "".join(source) if isinstance(source, list) else str(source or "")


def _released(paths):
    """The lesson as released (or its source), as an nbformat notebook, or None."""
    import nbformat
    for path in (paths.release, paths.source):
        if path.exists():
            return nbformat.read(str(path), as_version=4)
    return None


def trim(nb, released, max_cells=None, max_source=None, max_output=None):
    """Trim a notebook (a dict, as json.load gives it) in place to the limits; return what was done, in words."""
    import nbformat
    from .cells import nbgrader
    from .restore import match
    max_cells = MAX_CELLS if max_cells is None else max_cells
    max_source = MAX_SOURCE_BYTES if max_source is None else max_source
    max_output = MAX_OUTPUT_BYTES if max_output is None else max_output
    cells, done = nb["cells"], []
    sizes = [len(json.dumps(c.get("outputs", []))) for c in cells]
    if sum(sizes) > max_output:
        for c in cells:
            if c.get("cell_type") == "code":
                c["outputs"], c["execution_count"] = [], None
        done.append(f"{sum(sizes) / 2**20:.0f} MB of saved outputs (more than {max_output / 2**20:.0f} MB) "
                    f"were removed")
    big = [i for i, c in enumerate(cells) if c.get("cell_type") == "code" and len(_text(c.get("source")).encode(
        "utf-8", "surrogatepass")) > max_source]
    for i in big:
        size = len(_text(cells[i]["source"]).encode("utf-8", "surrogatepass"))
        cells[i]["source"] = f"# autograder: this cell's {size / 2**20:.1f} MB of code were removed (at most " \
                             f"{max_source / 2**20:.0f} MB per cell)\n"
    if big:
        done.append(f"the code of cell{'s' if len(big) > 1 else ''} {', '.join(str(i + 1) for i in big[:10])}"
                    f"{' ...' if len(big) > 10 else ''} (more than {max_source / 2**20:.0f} MB each) was removed")
    if len(cells) > max_cells:
        # only the fields restore.match reads: ids, nbgrader metadata, source, type
        light = nbformat.from_dict({"cells": [{"id": c.get("id"), "cell_type": c.get("cell_type"),
                                               "source": _text(c.get("source")),
                                               "metadata": {"nbgrader": nbgrader(c)}}
                                              for c in cells]})
        of_lesson = set(match(light, released)) if released is not None else set()
        room = max(0, max_cells - len(of_lesson))
        added = [i for i in range(len(cells)) if i not in of_lesson]
        keep = of_lesson | set(added[:room])
        nb["cells"] = [c for i, c in enumerate(cells) if i in keep]
        done.append(f"the notebook has {len(cells):,} cells (more than {max_cells}): graded with the "
                    f"{len(of_lesson)} cells of the lesson and the first {min(room, len(added)):,} cells you added; "
                    f"{len(added) - min(room, len(added)):,} added cells were left out")
    return done


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def check(paths):
    """`size:` flags for one submission (its course.SubmissionPaths), trimming its notebook in place where it is
    over a limit.

    Raises ValueError (its message starts with "size:") for a notebook too large to be graded at all.
    """
    from .files import write_atomic
    path, keep = paths.submitted, paths.trimmed
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"size: the notebook is {size / 2**20:.0f} MB, more than the {MAX_NOTEBOOK_BYTES // 2**20} "
                         f"MB a submission may be: not graded (remove large outputs and submit again)")
    data = path.read_bytes()
    digest = _sha256(data)
    try:
        record = json.loads((keep / "trim.json").read_text())
        if record.get("trimmed_sha256") == digest:  # the notebook trimmed before: the same flag
            return [Finding("size", record["flag"].removeprefix("size: "))]  # older records held its whole line
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        nb = json.loads(data)
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) \
                or not all(isinstance(c, dict) for c in nb["cells"]):
            return []
    except ValueError:
        return []  # not JSON: the notebook check says so
    if len(nb["cells"]) <= MAX_CELLS and size <= MAX_OUTPUT_BYTES and all(
            len(_text(c.get("source"))) <= MAX_SOURCE_BYTES // 4 for c in nb["cells"]):
        return []  # well within every limit: nothing to measure further
    done = trim(nb, _released(paths))
    if not done:
        return []
    keep.mkdir(parents=True, exist_ok=True)
    write_atomic(keep / path.name, data)
    try:
        trimmed = json.dumps(nb, indent=1, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (\ud800 in the JSON): keep it escaped
        trimmed = json.dumps(nb, indent=1).encode("ascii")
    flag = (f"{'; '.join(done)}. The original is kept in {keep.relative_to(paths.course)}/ (autograder/size.py "
            f"gives the limits)")
    write_atomic(keep / "trim.json", json.dumps(dict(original_sha256=digest, trimmed_sha256=_sha256(trimmed),
                                                     flag=flag), indent=1).encode())
    write_atomic(path, trimmed)
    return [Finding("size", flag)]
