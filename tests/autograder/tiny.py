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


# ---------------------------------------------------------------- a small lesson, released by the tiny_course fixture

LESSON = "00_tiny"
SECONDS = 3  # a given cell that takes this long: grading workers are busy when a test interrupts them


def lesson():
    """A source notebook in the course's form: a set-up cell, a slow given cell, two exercises with hidden tests."""
    nb = new_notebook()
    setup = cell("import time\nimport numpy as np", "setup")
    setup.metadata["tags"] = ["grader-setup"]
    nb.cells = [
        setup,
        cell(f"time.sleep({SECONDS})  # a given cell that takes a while", "slow"),
        cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "double",
             grade_id="double", solution=True),
        cell("assert double(3) == 6, 'double(3) should be 6'\n### BEGIN HIDDEN TESTS\n"
             "assert np.array_equal(double(np.arange(4)), np.arange(4) * 2), 'double of an array'\n"
             "### END HIDDEN TESTS", "test-double", grade_id="test_double", grade=True, locked=True, points=1),
        cell("def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION", "square",
             grade_id="square", solution=True),
        cell("assert square(3) == 9, 'square(3) should be 9'\n### BEGIN HIDDEN TESTS\n"
             "assert square(-2) == 4, 'square(-2) should be 4'\n### END HIDDEN TESTS", "test-square",
             grade_id="test_square", grade=True, locked=True, points=2),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write_lesson(path):
    nbformat.write(lesson(), str(path))


def stuck_worker(job_file):
    """A grading worker that never finishes (zygote target "tests.autograder.tiny:stuck_worker"): what the hard limit
    is for, whatever holds a real one up (a kernel that never starts, a hung filesystem)."""
    import time
    print(f"stuck on {job_file}", flush=True)
    time.sleep(600)
