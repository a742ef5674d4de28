"""A three-cell released notebook (set-up, one answer, one 2-point test) for the tests of single modules."""
import json

import nbformat
from nbformat.v4 import new_code_cell, new_notebook


def cell(source, cell_id, **nbgrader):
    cell = new_code_cell(source)
    cell["id"] = cell_id
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "locked": False, "solution": False, "grade": False,
                                     "task": False, **nbgrader}
    return cell


def released():
    nb = new_notebook()
    nb.cells = [cell("import numpy as np", "setup"),
                cell("def f():\n    raise NotImplementedError()", "answer", grade_id="f", solution=True),
                cell("assert f() == 1", "test", grade_id="test_f", grade=True, locked=True, points=2)]
    return nb


def copy(nb):
    return nbformat.from_dict(json.loads(json.dumps(nb)))
