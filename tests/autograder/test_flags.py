"""flags: what sends a submission to manual review, and what does not."""
import nbformat
import pytest

from autograder.flags import code_flags, deleted_tests, flag_submission
from autograder.restore import restore

HELPERS = {"check_close", "check_true"}


def _flags(code):
    return code_flags([code], HELPERS)


@pytest.mark.parametrize("code", ["import numpy as np\nnp.allclose = lambda *a, **k: True",
                                  "import torch\ntorch.testing.assert_close = print",
                                  "import builtins\nbuiltins.print = None",
                                  "import course_utils as cu\nsetattr(cu, 'check_close', None)",
                                  "from torch import nn\nnn.functional.softmax = abs",
                                  "import torch\ndel torch.allclose",
                                  # data changed in place, and attributes set past an object's own guard
                                  "import course_utils as cu\ncu.refusals.REFUSED.clear()",
                                  "import course_utils as cu\ncu.ambient.AMBIENT.__dict__.update(x=1)",
                                  "import course_utils as cu\nobject.__setattr__(cu.ambient.AMBIENT, 'x', 1)"])
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
                                  "%matplotlib inline\nimport numpy as np",
                                  "import torch\nwith torch.no_grad():\n    y = torch.ones(2).sum()",
                                  "import time\nfrom tqdm.auto import tqdm\nstart = time.perf_counter()"])
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


def test_a_test_cell_the_graded_copy_lacks_is_flagged_as_deleted_and_one_restored_is_not():
    """deleted_tests reads the graded copy once its metadata is restored (the worker reports it, job.py)."""
    graded = _notebook(("answer", "def f():\n    return 1", {"solution": True}))
    (found,) = deleted_tests(graded, SOURCE)
    assert (found.kind, found.cell, str(found)) == ("structure", "test_f",
                                                    "structure: test cell test_f was deleted (it scores zero)")
    renamed = _notebook(("answer", "def f():\n    return 1", {"solution": True}), ("mine", "assert f() == 1\n", {}))
    assert not any(f.kind == "structure" for f in flag_submission(renamed, SOURCE))  # nothing claims it deleted
    assert [c.kind for c in restore(renamed, SOURCE)] == ["tamper"]  # its grade id given back, by position
    assert deleted_tests(renamed, SOURCE) == []


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


def test_a_test_cell_moved_out_of_its_released_order_is_flagged_by_name():
    source = _notebook(("a1", "x = 1", {"solution": True}), ("t1", "assert x", {"grade": True, "locked": True}),
                       ("a2", "y = 1", {"solution": True}), ("t2", "assert y", {"grade": True, "locked": True}),
                       ("a3", "z = 1", {"solution": True}), ("t3", "assert z", {"grade": True, "locked": True}))
    assert flag_submission(source, source) == []
    moved = _notebook(*[(cells_gid, "pass", {}) for cells_gid in ("a1", "t3", "t1", "a2", "t2", "a3")])
    for cell, gid in zip(moved.cells, ("a1", "t3", "t1", "a2", "t2", "a3")):
        cell.source = next(c.source for c in source.cells if c.metadata["nbgrader"]["grade_id"] == gid)
        cell.metadata["nbgrader"] = next(c.metadata["nbgrader"] for c in source.cells
                                         if c.metadata["nbgrader"]["grade_id"] == gid)
    flags = [f for f in flag_submission(moved, source) if "moved" in f]
    assert flags == ["structure: cell t3 was moved below a1 (grading runs cells in the submitted order)"]


@pytest.mark.parametrize("code", ["import inspect\ninspect.currentframe().f_back",
                                  "import sys\nsys._getframe(1).f_code",
                                  "import linecache",
                                  "from traceback import extract_stack",
                                  "print(In[-1])",
                                  "print(_ih[-1])",
                                  "get_ipython().history_manager.get_range()",
                                  "getattr(__import__('sys'), '_getframe')(1)",
                                  "globals()['_ih']"])
def test_reading_the_running_cell_or_the_stack_is_flagged(code):
    assert any(f.startswith("introspect:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", ["get_ipython().displayhook(1.0)",
                                  "get_ipython().ast_transformers.append(object())",
                                  "get_ipython().set_custom_exc((AssertionError,), print)",
                                  "import sys\nsys.settrace(print)"])
def test_reaching_the_kernels_machinery_is_flagged(code):
    assert any(f.startswith("kernel:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", [
    "from concurrent.futures import ThreadPoolExecutor\ndef attention(q, k, v):\n"
    "    return ThreadPoolExecutor(1).submit(F.scaled_dot_product_attention, q, k, v).result()",
    "import threading",
    "import torch\n@torch.library.custom_op('me::sdpa', mutates_args=())\ndef sdpa(q: torch.Tensor) -> torch.Tensor:\n"
    "    return q",
    "import torch\ndef attention(q, k, v):\n    with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():\n"
    "        return F.scaled_dot_product_attention(q, k, v)",
    "import torch\nmodes = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]",
    "import subprocess\nsubprocess.run(['python', '-c', 'print(1)'])",
    "import os\nos.fork()",
    "mp = __import__('multiprocessing')",
    "from torch.utils._python_dispatch import _disable_current_modes",
    "exec('import threading')",
    "from triton.runtime import interpreter\ninterpreter.InterpreterBuilder.create_masked_load = lambda *a, **k: None",
])
def test_work_out_of_the_graded_calls_watch_is_flagged(code):
    assert any(f.startswith("escape:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", ["class Yes(float):\n    def __eq__(self, other):\n        return True",
                                  "import torch\nclass T(torch.Tensor):\n    __lt__ = __gt__ = lambda s, o: True",
                                  "import numpy as np\nclass A(np.ndarray):\n    def __array_ufunc__(self, *a, **k):\n"
                                  "        return True"])
def test_a_value_type_that_redefines_comparison_is_flagged(code):
    assert any(f.startswith("lie:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", ["import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x",
                                  "class Point:\n    def __lt__(self, other):\n        return self.x < other.x",
                                  "label = {'In': 1}\nprint(label['Out'] if False else 'In')",
                                  "import torch\nkernel_size = 3\nconv = torch.nn.Conv1d(2, 2, kernel_size)"])
def test_honest_classes_and_names_are_not_flagged(code):
    assert _flags(code) == []


def test_an_answer_that_a_test_cell_redefines_for_a_while_is_not_a_helper():
    source = _notebook(("answer", "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", {"solution": True}),
                       ("test_g", "def f():\n    return 1\nassert g() == 2", {"grade": True, "locked": True, "points": 1}))
    submitted = _notebook(("answer", "def f():\n    return 1", {"solution": True}),
                          ("test_g", "def f():\n    return 1\nassert g() == 2", {"grade": True, "locked": True, "points": 1}))
    assert flag_submission(submitted, source) == []


# ---------------------------------------------------------------- IPython's history: reads, not names

@pytest.mark.parametrize("code", ["for _i in range(3):\n    print(_i)",
                                  "total = sum(_i * 2 for _i in range(3))",
                                  "xs = [_ii for _ii in range(3)]",
                                  "def f(_i):\n    return _i + 1",
                                  "def f():\n    _i = 0\n    while _i < 3:\n        _i += 1\n    return _i",
                                  "def f():\n    for _i in range(3):\n        yield lambda: _i",
                                  "_i = 0\n_i += 1\nprint(_i)",
                                  "In = [1, 2]\nprint(In[-1])",
                                  "class Counter:\n    def __init__(self):\n        self._i = 0\n"
                                  "    def next(self):\n        self._i += 1\n        return self._i",
                                  "import gc\ngc.collect()",
                                  "import numpy as np\nx = eval('np.zeros(3)')",
                                  "%time x = 1"])
def test_a_history_name_the_student_binds_is_their_own_variable(code):
    assert _flags(code) == []


@pytest.mark.parametrize("code", ["print(_i)",
                                  "print(_i5)",
                                  "def f():\n    return _ih[-1]",
                                  "def f():\n    for k in range(3):\n        pass\n    return _i",
                                  "print(_i)\nfor _i in range(3):\n    pass",
                                  "_i += 'x'",
                                  "def f():\n    global _i\n    _i = 1\n    return _i",
                                  "[In[-1] for _ in range(1)]",
                                  "x = %history -n 1-100",
                                  "%recall 3",
                                  "get_ipython().run_line_magic('history', '')",
                                  "import __main__\n__main__._ih[-1]",
                                  "from __main__ import _ih",
                                  "globals().get('_ih')",
                                  "get_ipython().user_ns.get('In')",
                                  "eval('In[-1]')",
                                  "exec(\"import inspect\")",
                                  "import gc\ngc.get_referents(1)",
                                  "helper??",
                                  "%psource helper"])
def test_reading_the_history_is_flagged_however_it_is_written(code):
    assert any(f.startswith("introspect:") for f in _flags(code)), _flags(code)


def test_a_loop_variable_named_like_the_history_in_one_cell_does_not_hide_a_read_in_the_next():
    assert code_flags(["for _i in range(3):\n    pass", "print(_i)"]) != []  # IPython set _i again
    assert code_flags(["Out = []", "Out.append(1)\nprint(Out)"]) == []      # In/Out are set once: the student's


def test_a_flag_from_code_in_a_string_says_where_it_came_from():
    assert _flags("x = 1\neval('In[-1]')") == [
        "introspect: line 1 reads IPython's history (In, where the hidden tests are) (in the code passed to eval "
        "on line 2)"]


@pytest.mark.parametrize("code", ["!cat ../../gradebook.db", "x = !ls /srv/solutions"])
def test_shell_escapes_are_read_as_code(code):
    assert any(f.startswith("reach:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("cell_type", ["markdown", "raw"])
def test_a_test_cell_turned_into_markdown_is_flagged(cell_type):
    submitted = _notebook(("answer", "def f():\n    return 1", {"solution": True}),
                          ("test_f", "assert f() == 1\n", {"grade": True, "locked": True, "points": 1}))
    assert flag_submission(submitted, SOURCE) == []
    cell = submitted.cells[1]
    cell.cell_type = cell_type
    del cell["outputs"], cell["execution_count"]
    assert flag_submission(submitted, SOURCE) == [
        f"structure: test cell test_f was turned into a {cell_type} cell (nbgrader restores it as a code cell "
        f"and grades it)"]


@pytest.mark.parametrize("code", ["print('my solutions are below')", "x = getattr(self, '_i', 0)",
                                  "msg = 'compare with the solutions in the lecture'"])
def test_prose_and_own_attributes_are_not_flagged(code):
    assert _flags(code) == []


@pytest.mark.parametrize("code, kind", [("open('../solutions/03.ipynb')", "reach:"), ("x = '/srv/solutions'", "reach:"),
                                        ("import __main__\ngetattr(__main__, '_i3')", "introspect:"),
                                        ("%%bash\ncat /course/gradebook.db", "reach:"),
                                        ("%%capture\nprint(In[-1])", "introspect:")])
def test_grader_paths_and_history_in_every_form_are_flagged(code, kind):
    assert any(f.startswith(kind) for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", [
    "get_ipython().display_formatter.formatters['text/plain'].for_type(float, lambda *a: None)",
    "import sys\nsys.addaudithook(lambda event, args: None)",
    "import builtins\nglobals()['__builtins__'] = dict(vars(builtins))",
])
def test_what_can_replay_or_rewrite_a_result_after_the_call_is_flagged(code):
    """Round 6's routes around a refusal inside the kernel (issue 56): an output formatter that replays a refused
    request, an audit hook that sees every request, the built-ins table replaced: each flagged from the source."""
    assert any(f.startswith("kernel:") for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code, kind", [
    # the kernel's machinery reached by name, through IPython's events, or through a dict whose look-ups run code
    ("getattr(get_ipython(), 'user_expressions')", "kernel:"),
    ("get_ipython().display_formatter.mimebundle_formatter.for_type(str, print)", "kernel:"),
    ("get_ipython().events.register('post_execute', print)", "kernel:"),
    ("ip = get_ipython()\nhooks = ip.events\nhooks.register(*['pre_run_cell', print])", "kernel:"),
    ("class B(dict):\n    def __getitem__(self, name):\n        return print", "kernel:"),
    # native code and raw memory, however the module is reached
    ("import sys\nc = sys.modules['ctypes']", "escape:"),
    ("import importlib\nimportlib.import_module('_ctypes')", "escape:"),
    ("import numpy as np\naddress = np.zeros(3).ctypes.data", "escape:"),
    ("from numpy import ctypeslib", "escape:"),
    ("import torch\nlib = torch._C._dispatch_library('IMPL', 'aten', '', 'refusals.py', 102)", "escape:"),
    # gc's and sys's readers imported by name
    ("from gc import get_objects as everything\neverything()", "introspect:"),
    ("from sys import _getframe", "introspect:"),
    # a watched module reached as data, through sys.modules or import_module
    ("import sys\nt = sys.modules['course_utils.refusals']\nt.KERNELS.update({'softmax': ()})", "patch:"),
    ("import sys\nsys.modules['course_utils.refusals'].KERNELS.clear()", "patch:"),
    ("import importlib\nimportlib.import_module('numpy').allclose = print", "patch:"),
])
def test_what_reaches_a_refusal_or_the_kernel_by_another_name_is_flagged(code, kind):
    """Issue 56's routes written without the names the flags knew: each earns the flag its technique earns."""
    assert any(f.startswith(kind) for f in _flags(code)), _flags(code)


@pytest.mark.parametrize("code", ["import importlib\nnp = importlib.import_module('numpy')\nx = np.zeros(3)",
                                  "events = ['a']\nevents.append('b')",
                                  "class Vocab(dict):\n    def add(self, word):\n        self[word] = len(self)",
                                  "counts = {}\ncounts.get('the', 0)"])
def test_honest_look_alikes_of_those_routes_are_not_flagged(code):
    assert _flags(code) == []


@pytest.mark.parametrize("code, found", [
    ("a = q.numpy()\n", "cell 3, line 1: .numpy"),
    ("p = torch.from_numpy(np.exp(a))\n", "cell 3, line 1: .from_numpy"),
    ("import ctypes\n", "cell 3, line 1: imports ctypes"),
    ("x = 1\nimport mmap as m\n", "cell 3, line 2: imports mmap"),
    ("from torch import frombuffer\n", "cell 3, line 1: imports frombuffer from torch"),
    ("c = importlib.import_module('c' + 'types')\n", "cell 3, line 1: import_module of a computed name"),
    ("f = getattr(q, 'data_ptr')\n", "cell 3, line 1: getattr of 'data_ptr'"),
])
def test_data_moved_out_of_torchs_sight_is_named_by_cell_and_line(code, found):
    from autograder.flags import data_moves
    assert data_moves([(3, code)]) == [found]


def test_honest_tensor_code_moves_no_data():
    from autograder.flags import data_moves
    assert data_moves([(1, "def f(q, k):\n    w = torch.softmax(q @ k.mT, -1)\n    return getattr(w, 'sum')(-1)\n")]) == []
