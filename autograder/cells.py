"""A notebook cell's nbgrader metadata: the one place that reads it.

nbgrader marks a cell in `metadata.nbgrader`: `grade_id`, `solution` (an answer cell),
`grade` (a graded cell, with `points`), `locked`. The course's kinds of cell:

- an answer cell: `solution` true (a code cell the student writes in);
- a test cell: a code cell with `grade` true and `solution` false (locked; visible tests,
  then hidden ones between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS`);
- everything else is given (ready-made code, prose).
"""
import keyword

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = "BEGIN SOLUTION", "END SOLUTION"


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


# Shorter lines (`)`, `else:`, `x = 1`) reveal nothing and would blank too much of an output. 6 was feedback's and
# is the stricter of the two the course had (the site's scan used 12): with it the site's scan still finds no line
# of a solution or hidden test on any lesson's page, and feedback hides the short hidden-test lines too.
MIN_SECRET_LINE = 6


def secret_lines(source, solutions=False):
    """The lines no student-facing page may show: a cell's hidden tests (and, with `solutions`, its solution
    regions), stripped, each at least MIN_SECRET_LINE characters long and not a bare keyword (`return`,
    `finally:`: nothing to reveal, and scrubbing one mangled "returned" in a message), in order, without repeats.

    A region starts at a line holding `BEGIN HIDDEN TESTS` (`BEGIN SOLUTION`) and ends at the line holding
    its END, as nbgrader reads them. The one rule for feedback's scrubbing and the site's leak check; each
    caller then drops the lines that are public anyway (shown to students elsewhere).
    """
    begins = (HIDDEN_BEGIN, SOLUTION_BEGIN) if solutions else (HIDDEN_BEGIN,)
    ends = (HIDDEN_END, SOLUTION_END) if solutions else (HIDDEN_END,)
    found, inside = [], False
    for line in source.splitlines():
        text = line.strip()
        if any(b in text for b in begins):
            inside = True
        elif any(e in text for e in ends):
            inside = False
        elif inside and len(text) >= MIN_SECRET_LINE and text not in found and not keyword.iskeyword(text.rstrip(":")):
            found.append(text)
    return found
