"""Write nbgrader solution notebooks from Python: a small authoring aid.

The notebooks in solutions/ are the source of truth; this only saves typing
cell metadata by hand when a lesson is first written or rebuilt:

    from tools.nbauthor import md, code, solution, tests, write
    write("solutions/07_x.ipynb", [md("# Title"), solution("ex1", "def f(): ..."),
                                   tests("test_ex1", 2, "assert f() == 1")])
"""
import textwrap

import nbformat


def _meta(grade_id, grade, solution, locked, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _clean(text):
    return textwrap.dedent(text).strip("\n")


def md(text, grade_id=None):
    """A markdown cell; with grade_id it is locked (students cannot edit it)."""
    cell = nbformat.v4.new_markdown_cell(_clean(text))
    if grade_id:
        cell.metadata.update(_meta(grade_id, False, False, True))
    return cell


def code(text, grade_id=None):
    """An ordinary code cell; with grade_id it is locked."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    if grade_id:
        cell.metadata.update(_meta(grade_id, False, False, True))
    return cell


def solution(grade_id, text):
    """An autograded answer cell: code between ### BEGIN/END SOLUTION is removed for students."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    cell.metadata.update(_meta(grade_id, False, True, False))
    return cell


def tests(grade_id, points, text):
    """A locked test cell worth `points`; lines in ### BEGIN/END HIDDEN TESTS are hidden from students."""
    cell = nbformat.v4.new_code_cell(_clean(text))
    cell.metadata.update(_meta(grade_id, True, False, True, points))
    return cell


def write(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata.update({
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    })
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:03d}"
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return path
