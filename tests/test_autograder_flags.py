"""flags: what sends a submission to manual review, and what does not."""
import nbformat
import pytest

from autograder.flags import code_flags, flag_submission

HELPERS = {"check_close", "check_true"}


def _flags(code):
    return code_flags([code], HELPERS)


@pytest.mark.parametrize("code", ["import numpy as np\nnp.allclose = lambda *a, **k: True",
                                  "import torch\ntorch.testing.assert_close = print",
                                  "import builtins\nbuiltins.print = None",
                                  "import course_utils as cu\nsetattr(cu, 'check_close', None)",
                                  "from torch import nn\nnn.functional.softmax = abs",
                                  "import torch\ndel torch.allclose"])
def test_patching_watched_modules_is_flagged(code):
    assert any(f.startswith("patch:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", ["class A:\n    def __eq__(self, other):\n        return True",
                                  "class A:\n    __eq__ = lambda self, other: True"])
def test_always_true_eq_is_flagged(code):
    assert any(f.startswith("eq:") for f in _flags(code))


def test_redefined_test_helper_is_flagged():
    assert any(f.startswith("helper:") for f in _flags("def check_close(*a, **k):\n    pass"))


def test_naming_grader_files_is_flagged():
    assert any(f.startswith("reach:") for f in _flags("open('../../gradebook.db').read()"))


@pytest.mark.parametrize("code", ["import numpy as np\nx = np.zeros(3)\nx[0] = 1",
                                  "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.weight.data[:] = 0",
                                  "class A:\n    def __eq__(self, other):\n        return self.x == other.x",
                                  "def softmax(x):\n    return x.softmax(-1)",
                                  "%matplotlib inline\nimport numpy as np"])
def test_honest_code_is_not_flagged(code):
    assert _flags(code) == []


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    for gid, source, meta in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": gid, "schema_version": 3, **meta}
        nb.cells.append(cell)
    return nb


SOURCE = _notebook(("answer", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", {"solution": True}),
                   ("test_f", "assert f() == 1\n### BEGIN HIDDEN TESTS\nassert f() + 1 == 2\n### END HIDDEN TESTS",
                    {"grade": True, "locked": True, "points": 1}))


def test_deleted_test_cell_is_flagged():
    submitted = _notebook(("answer", "def f():\n    return 1", {"solution": True}))
    assert any("test cell test_f was deleted" in f for f in flag_submission(submitted, SOURCE))


def test_edited_test_cell_is_flagged_but_the_student_copy_is_not():
    original = _notebook(("answer", "def f():\n    return 1", {"solution": True}),
                         ("test_f", "assert f() == 1\n", {"grade": True, "locked": True, "points": 1}))
    assert flag_submission(original, SOURCE) == []
    original.cells[1].source = "pass"
    assert any("test_f was edited" in f for f in flag_submission(original, SOURCE))


def test_duplicated_cell_is_flagged():
    submitted = _notebook(("answer", "def f():\n    return 1", {"solution": True}),
                          ("answer", "def f():\n    return 1", {"solution": True}),
                          ("test_f", "assert f() == 1\n", {"grade": True, "locked": True, "points": 1}))
    assert any("answer appears 2 times" in f for f in flag_submission(submitted, SOURCE))
