"""The `structure` rule: test cells deleted, edited, duplicated, moved or turned into another kind of cell.

`structure_flags` reads the submission as handed in; `deleted_tests` reads the graded copy, once its metadata is
restored (the worker's RestoreCellMetadata calls it): a test cell is deleted when grading cannot find it."""
import re

from .. import cells
from ..job import Finding


def deleted_tests(graded_nb, released_nb):
    """A `structure` Finding for every released test cell the graded copy (metadata restored) does not hold."""
    held = {cells.grade_id(c) for c in graded_nb.cells}
    return [Finding("structure", f"test cell {cells.grade_id(c)} was deleted (it scores zero)", cells.grade_id(c))
            for c in released_nb.cells if cells.is_test(c) and cells.grade_id(c) not in held]


def structure_flags(submitted_nb, source_nb):
    """Test cells edited, duplicated, moved or turned into another kind, compared with the source notebook."""
    source_cells = {cells.grade_id(c): c for c in source_nb.cells if cells.grade_id(c)}
    seen = {}
    for cell in submitted_nb.cells:
        gid = cells.grade_id(cell)
        if gid:
            seen[gid] = seen.get(gid, 0) + 1
    flags = [Finding("structure", f"cell {gid} appears {n} times (nbgrader keeps the first)", gid)
             for gid, n in seen.items() if n > 1]
    for cell in submitted_nb.cells:
        gid = cells.grade_id(cell)
        src = source_cells.get(gid)
        if src is not None and cell.cell_type != src.cell_type:
            kind = "test cell" if cells.is_test(src) else "cell"
            flags.append(Finding("structure", f"{kind} {gid} was turned into a {cell.cell_type} cell (nbgrader "
                                 f"restores it as a {src.cell_type} cell and grades it)", gid))
        elif src is not None and cells.nbgrader(src).get("locked") and cell.source.strip() != src.source.strip() \
                and cells.HIDDEN_BEGIN not in src.source:
            flags.append(Finding("structure", f"locked cell {gid} was edited (nbgrader restores it)", gid))
        elif src is not None and cells.HIDDEN_BEGIN in src.source and not _same_visible(cell.source, src.source):
            flags.append(Finding("structure", f"test cell {gid} was edited (nbgrader restores it)", gid))
    return flags + _moved(submitted_nb, source_nb)


def _moved(submitted_nb, source_nb):
    """Graded cells out of their released order: a test that now runs before an earlier answer or test.

    Grading runs the cells in the submitted order, so a test cell moved up can run while the
    kernel holds what a later cell would have made; each move is named for the instructor."""
    order = {}
    for cell in source_nb.cells:
        if cells.grade_id(cell) and cells.grade_id(cell) not in order:
            order[cells.grade_id(cell)] = len(order)
    kept, seen = [], set()
    for cell in submitted_nb.cells:
        gid = cells.grade_id(cell)
        if gid in order and gid not in seen:
            seen.add(gid)
            kept.append(gid)
    in_place = _longest_increasing(kept, order)  # the cells that kept their order; the others moved
    flags = []
    for i, gid in enumerate(kept):
        if gid not in in_place:
            after = f"below {kept[i - 1]}" if i else "to the top"
            flags.append(Finding("structure", f"cell {gid} was moved {after} (grading runs cells in the submitted "
                                 "order)", gid))
    return flags


def _longest_increasing(gids, order):
    """The largest set of `gids` (in their order) whose released order also increases."""
    best = {}  # gid: the longest increasing run ending at it
    for i, gid in enumerate(gids):
        runs = [best[g] for g in gids[:i] if order[g] < order[gid]]
        best[gid] = max(runs, key=len, default=[]) + [gid]
    return set(max(best.values(), key=len, default=[]))


def _same_visible(submitted, source):
    """The student copy of a test cell has the hidden region removed: compare what is visible."""
    visible = re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", "", source, flags=re.S)
    squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
    return squash(submitted) == squash(visible)
