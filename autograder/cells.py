"""A notebook cell's nbgrader metadata: the one place that reads it.

nbgrader marks a cell in `metadata.nbgrader`: `grade_id`, `solution` (an answer cell),
`grade` (a graded cell, with `points`), `locked`. The course's kinds of cell:

- an answer cell: `solution` true (a code cell the student writes in);
- a test cell: a code cell with `grade` true and `solution` false (locked; visible tests,
  then hidden ones between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS`);
- everything else is given (ready-made code, prose).
"""
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def nbgrader(cell):
    """The cell's nbgrader metadata ({} when it has none or it is not a dict)."""
    meta = cell.get("metadata", {}).get("nbgrader") or {}
    return meta if isinstance(meta, dict) else {}


def grade_id(cell):
    return nbgrader(cell).get("grade_id")


def is_answer(cell):
    return bool(nbgrader(cell).get("solution"))


def is_test(cell):
    """A graded test cell: code, graded, not an answer."""
    meta = nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def points(cell):
    return float(nbgrader(cell).get("points") or 0)


def without_hidden_tests(source):
    """A test cell's source with its hidden-test region removed."""
    kept, hidden = [], False
    for line in source.split("\n"):
        if HIDDEN_BEGIN in line:
            hidden = True
        elif HIDDEN_END in line:
            hidden = False
        elif not hidden:
            kept.append(line)
    return "\n".join(kept).rstrip("\n")


def hidden_test_lines(source, min_length=12):
    """The stripped lines of a cell's hidden-test region at least `min_length` long (what a leak check looks for)."""
    found = []
    for block in source.split("### " + HIDDEN_BEGIN)[1:]:
        found += [line.strip() for line in block.split("### " + HIDDEN_END)[0].splitlines()
                  if len(line.strip()) >= min_length]
    return found
