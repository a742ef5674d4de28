"""The `structure` rule: test cells deleted, edited, duplicated or turned into another kind of cell."""
import re

from .. import cells


def structure_flags(submitted_nb, source_nb):
    """Test cells deleted, edited or duplicated, compared with the source notebook."""
    flags = []
    source_cells = {cells.grade_id(c): c for c in source_nb.cells if cells.grade_id(c)}
    seen = {}
    for cell in submitted_nb.cells:
        gid = cells.grade_id(cell)
        if gid:
            seen[gid] = seen.get(gid, 0) + 1
    for gid, cell in source_cells.items():
        if cells.is_test(cell) and gid not in seen:
            flags.append(f"structure: test cell {gid} was deleted (it scores zero)")
    flags += [f"structure: cell {gid} appears {n} times (nbgrader keeps the first)" for gid, n in seen.items() if n > 1]
    for cell in submitted_nb.cells:
        gid = cells.grade_id(cell)
        src = source_cells.get(gid)
        if src is not None and cell.cell_type != src.cell_type:
            kind = "test cell" if cells.is_test(src) else "cell"
            flags.append(f"structure: {kind} {gid} was turned into a {cell.cell_type} cell (nbgrader restores it as "
                         f"a {src.cell_type} cell and grades it)")
        elif src is not None and cells.nbgrader(src).get("locked") and cell.source.strip() != src.source.strip() \
                and cells.HIDDEN_BEGIN not in src.source:
            flags.append(f"structure: locked cell {gid} was edited (nbgrader restores it)")
        elif src is not None and cells.HIDDEN_BEGIN in src.source and not _same_visible(cell.source, src.source):
            flags.append(f"structure: test cell {gid} was edited (nbgrader restores it)")
    return flags


def _same_visible(submitted, source):
    """The student copy of a test cell has the hidden region removed: compare what is visible."""
    visible = re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", "", source, flags=re.S)
    squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
    return squash(submitted) == squash(visible)
