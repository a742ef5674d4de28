"""A hostile class of one lesson: every kind of bad, broken and cheating submission, built from its solution.

build_class(course, lesson) gives {student: (notebook or raw text, file name)}; tests/graded_class.py
zips them with the other lessons' submissions and grades them once; tests/autograder/test_class.py
checks what each student got. The lesson is 03 (the quickest to run, no training), or those named
in AUTOGRADER_TEST_LESSONS ("all", or a comma list of lesson ids).

Every student starts from the release copy without its demonstrations (`without_demonstrations`: the
ordinary code cells no later cell needs, such as timings, training runs, plots and explorers). A student
may delete those cells; every graded cell and everything it uses stays, and each of the ~36 gradings
takes about half the time (lesson 03 runs in about 12 s instead of 20 s, two at a time on 2 cores).
"""
import ast
import builtins
import json
import os
import zipfile

import nbformat

from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, grade_id, load, solution_ids

QUICKEST = "03_queries_keys_values"
_chosen = os.environ.get("AUTOGRADER_TEST_LESSONS", QUICKEST if QUICKEST in LESSONS else LESSONS[0])
TEST_LESSONS = LESSONS if _chosen == "all" else [l for l in _chosen.split(",") if l in LESSONS]
# the small hostile class of the default test run (the full run grades the whole class, tests/full_run.py): honest,
# unstarted and half done, broken JSON, a kernel that dies, a patch of the checks, an answer equal to anything, a
# snoop at the grader's files (the sandbox) and a rebound check; tests/autograder/test_cluster.py grades six of them
FAST_CLASS = ("perfect", "blank", "partial", "invalid_json", "os_exit", "monkeypatch", "always_equal", "snoop",
              "rebind")


def _with_code(nb, gid, before="", after=""):
    """A copy of nb with code added at the top / bottom of answer cell `gid`."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    cell = next(c for c in nb.cells if grade_id(c) == gid)
    cell.source = before + cell.source + after
    return nb


def _without(nb, gid):
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    nb.cells = [c for c in nb.cells if grade_id(c) != gid]
    return nb


def graded_test_ids(nb):
    return [grade_id(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata.get("nbgrader", {}).get("solution")]


def _scope_names(nodes):
    """(names bound, names read before being bound) by statements `nodes` run in one scope, in order."""
    bound, free = set(), set()
    for stmt in nodes:
        binds, reads = set(), set()
        for node in _walk_scope(stmt):
            if isinstance(node, ast.Name):
                (reads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                binds.add(node.name)
                inner = node.body + [ast.Expr(e) for e in node.decorator_list + getattr(node, "bases", [])]
                arguments = getattr(node, "args", None)   # a class has none
                params = {a.arg for a in ast.walk(arguments) if isinstance(a, ast.arg)} if arguments else set()
                reads |= _scope_names(inner)[1] - params
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                binds.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
                base = node.value
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                if isinstance(base, ast.Name):
                    binds.add(base.id)   # x.a = ... or x[i] = ...: changes x
        free |= reads - bound
        bound |= binds
    return bound, free


def _walk_scope(node):
    """ast.walk without descending into function or class bodies (their names are another scope)."""
    yield node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    if isinstance(node, ast.Lambda):
        params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        yield from (n for n in ast.walk(node.body) if not (isinstance(n, ast.Name) and n.id in params))
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk_scope(child)


def _names(source):
    """(names a code cell binds, names it reads that it did not bind first, names it imports); magics become
    the calls IPython makes."""
    from IPython.core.inputtransformer2 import TransformerManager
    tree = ast.parse(TransformerManager().transform_cell(source))
    imports = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    binds, reads = _scope_names(tree.body)
    return binds, reads, imports


def without_demonstrations(nb, lesson):
    """A copy of nb without the ordinary code cells that no later cell needs.

    A cell is kept if it binds a name that a later kept cell reads, or reads one (other than an imported
    module or a builtin) that a later kept cell reads: a demonstration may change an object in place
    (model.train()). A graded test cell reads what the lesson's full test, hidden part included, reads."""
    full_tests = {grade_id(c): c.source for c in load(SOLUTIONS / f"{lesson}.ipynb").cells if grade_id(c)}
    analysed = [_names(full_tests.get(grade_id(c), c.source)) if c.cell_type == "code" else None for c in nb.cells]
    imported = set(vars(builtins)).union(*(names[2] for names in analysed if names))
    needed, keep = set(), []
    for cell, names in zip(reversed(nb.cells), reversed(analysed)):
        ordinary_code = names is not None and "nbgrader" not in cell.metadata
        keep.append(not ordinary_code or bool(names[0] & needed or (names[1] - imported) & needed))
        if names is not None and keep[-1]:
            needed |= names[1]
    light = nbformat.from_dict(json.loads(json.dumps(nb)))
    light.cells = [c for c, k in zip(light.cells, reversed(keep)) if k]
    return light


def build_class(course, lesson, students=None):
    """{student: (notebook or raw text, file name)} covering every kind of submission (only `students` if given)."""
    blank = without_demonstrations(load(course / "release" / lesson / f"{lesson}.ipynb"), lesson)
    full = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"))
    ids = solution_ids(full)
    first, last = ids[0], ids[-1]
    wrapped = last_function_answer(full)
    tests = graded_test_ids(full)
    edited = nbformat.reads(nbformat.writes(full), as_version=4)
    next(c for c in edited.cells if grade_id(c) == tests[0]).source = "pass  # tests? what tests?"
    duplicated = nbformat.reads(nbformat.writes(full), as_version=4)
    i = next(i for i, c in enumerate(duplicated.cells) if grade_id(c) == first)
    duplicated.cells.insert(i + 1, nbformat.from_dict(json.loads(json.dumps(duplicated.cells[i]))))
    duplicated.cells[i + 1]["id"] = "duplicated-cell"
    twin = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"), ids[1:])
    name = f"{lesson}.ipynb"
    everyone = {
        "perfect": (full, name),
        "blank": (blank, name),
        "partial": (fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"), ids[:2]), name),
        "syntax_error": (_with_code(full, last, before="def broken(:\n"), name),
        "infinite_loop": (_with_code(full, last, before="while True:\n    pass\n"), name),
        "memory_bomb": (_with_code(full, last, before="_hog = []\nwhile True:\n    _hog.append(bytearray(2**27))\n"),
                        name),
        "os_exit": (_with_code(full, last, before="import os\nos._exit(3)\n"), name),
        "sys_exit": (_with_code(full, last, before="import sys\nsys.exit(1)\n"), name),
        "deleted_test": (_without(full, tests[-1]), name),
        "edited_test": (edited, name),
        "duplicated_cell": (duplicated, name),
        "colab_renamed": (full, f"Copy of {lesson} (1).ipynb"),
        "invalid_json": ('{"cells": [ this is not json', name),
        "giant_output": (_with_code(full, first, after="\nfor _i in range(100000):\n    print('spam ' * 20)\n"), name),
        "stderr_warnings": (_with_code(full, first, after=NOISY.format(name=_defined_in(full, first))), name),
        "flood": (_with_code(full, first, after=FLOOD.format(name=_defined_in(full, first))), name),
        "dies_in_test": (_with_code(full, wrapped, after=DIES.format(name=_defined_in(full, wrapped))), name),
        "garbled": (_with_code(full, first, after="\nget_ipython().kernel.session.pack = lambda obj: b'{}'\n"), name),
        "monkeypatch": (_with_code(blank, first, before="import course_utils as cu\nimport torch\n"
                                                        "cu.check_close = lambda *a, **k: None\n"
                                                        "torch.allclose = lambda *a, **k: True\n"), name),
        "always_equal": (_with_code(full, first, after="\nclass Anything:\n    def __eq__(self, other):\n"
                                                         "        return True\n"), name),
        "snoop": (_with_code(full, first, after=SNOOP.format(course=str(course.resolve()), solutions=str(SOLUTIONS))),
                  name),
        # display results, lying objects, patched checks, reading the tests, tampered metadata, unsafe HTML
        "displayhook": (_with_code(blank, first, after=DISPLAYHOOK.format(name=_defined_in(blank, first))), name),
        "lying": (_with_code(full, wrapped, after=LYING.format(name=_defined_in(full, wrapped))), name),
        "rebind": (_with_code(full, first, before=REBIND), name),
        "deep_patch": (_with_code(full, first, before=DEEP_PATCH), name),
        "leaky": (_with_html(_with_code(full, wrapped, after=LEAKY.format(name=_defined_in(full, wrapped))), first),
                  name),
        "tampered": (_tampered(full, tests[0], first), name),
        "tampered_colab": (_tampered(full, tests[0], first, colab=True), name),
        # patches inside the kernel beside an honest twin (the first exercise left undone): the same score
        "honest_twin": (twin, name),
        **{student: (_with_code(twin, first, before=patch), name) for student, patch in KERNEL_PATCHES.items()},
        "thief": (_with_code(twin, first, before=THIEF), name),
        # issue 19 sections 5 and 7: an absurd notebook, a test cell turned into Markdown, a loop variable _i
        "huge": (_with_extra_cells(full, 5000), name),
        "markdown_test": (_as_markdown(full, tests[0]), name),
        "loop_i": (_with_code(full, first, after="\nfor _i in range(3):\n    _j = _i * 2\n"), name),
    }
    return everyone if students is None else {student: everyone[student] for student in students}


def _with_extra_cells(nb, n):
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(f"_extra_{i} = {i}") for i in range(n)]
    return nb


def _as_markdown(nb, gid):
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if grade_id(c) == gid)
    cell = nb.cells[i]
    nb.cells[i] = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)
    nb.cells[i]["id"] = cell.get("id", "md-test")
    return nb


def _tampered(nb, test_gid, answer_gid, colab=False):
    """A test cell's grade_id renamed, an answer cell and a provided cell marked as graded with big points."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == test_gid:
            meta["grade_id"] = "test_renamed"
        elif meta.get("grade_id") == answer_gid:
            meta.update(grade=True, points=100)
    provided = next(c for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata)
    provided.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "locked": False, "points": 50,
                                     "schema_version": 3, "solution": False, "task": False}
    if colab:  # Colab downloads are nbformat 4.4: no cell ids to match by
        nb.nbformat_minor = 4
        for cell in nb.cells:
            cell.pop("id", None)
    return nb


def _with_html(nb, gid):
    nb = _with_code(nb, gid, after=HTML_OUTPUT)
    nb.cells.append(nbformat.v4.new_markdown_cell("My notes <script>window.PWNED = 4</script>"
                                                  "<img src=x onerror=\"window.PWNED = 5\">"))
    return nb


DISPLAYHOOK = """
_stub = {name}
def {name}(*a, **k):
    get_ipython().displayhook("full marks" + ", please")
    return _stub(*a, **k)
"""

LYING = """
import numpy as _np
import torch as _torch

def _true(self, other):
    return True

class _LyingFloat(float):
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _true
    __hash__ = float.__hash__
    def __abs__(self):
        return _LyingFloat(0.0)
    def __sub__(self, other):
        return _LyingFloat(0.0)
    __rsub__ = __sub__

class _LyingTensor(_torch.Tensor):
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _true

class _LyingArray(_np.ndarray):
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _true

def _lie(value):
    if isinstance(value, tuple):
        return tuple(_lie(v) for v in value)
    if isinstance(value, float):
        return _LyingFloat(value + 1.0)
    if isinstance(value, _torch.Tensor):
        return (value.detach() + 1.0).as_subclass(_LyingTensor)
    if isinstance(value, _np.ndarray):
        return (value + 1.0).view(_LyingArray)
    return value

_honest = {name}
if isinstance(_honest, type):
    _honest_forward = _honest.forward
    {name}.forward = lambda self, *a, **k: _lie(_honest_forward(self, *a, **k))
else:
    def {name}(*a, **k):
        return _lie(_honest(*a, **k))
"""

REBIND = """setattr(vars()['c' + 'u'], 'check_' + 'close', lambda *a, **k: None)
import importlib
importlib.import_module('course_utils.checks').plain_float = float
exec('import torch; torch.allclose = lambda *a, **k: True')
"""

DEEP_PATCH = """import ast as _ast
import course_utils as cu
cu.check_true.__code__ = (lambda *a, **k: None).__code__
class _NoAsserts(_ast.NodeTransformer):
    def visit_Assert(self, node):
        return None
get_ipython().ast_transformers.append(_NoAsserts())
"""

LEAKY = """
import base64 as _b64, sys as _sys
_real = {name}
def _leak():
    _caller = _sys._getframe(2)
    _text = get_ipython().user_ns["In"][-1]
    if "HIDDEN" not in _text:
        return
    print("B64", _b64.b64encode(_text.encode()).decode())
    print("REV", _text[::-1])
    print("SPACED", " ".join(_text))
    print("HTML", _text)
if isinstance(_real, type):
    _real_forward = _real.forward
    def _forward(self, *a, **k):
        _leak()
        return _real_forward(self, *a, **k)
    {name}.forward = _forward
else:
    def {name}(*a, **k):
        _leak()
        return _real(*a, **k)
"""

HTML_OUTPUT = """
from IPython.display import HTML, Javascript, display
display(HTML('<b>bold</b><script>window.PWNED = 1</script><img src=x onerror="window.PWNED = 2">'))
display(Javascript('window.PWNED = 3'))
"""


# Patches that decided verdicts when the tests ran in the kernel (issue 19, section 2); each is put at the
# top of the first answer cell of a twin whose first exercise is undone, and must earn what the twin earns.
KERNEL_PATCHES = {
    "tensor_methods": "import torch as _t\n_T = type(_t.zeros(0))\n_T.allclose = lambda *a, **k: True\n"
                      "_T.equal = lambda *a, **k: True\n_t.testing.assert_close = lambda *a, **k: None\n",
    "numpy_internals": "import numpy as _np\nimport numpy.core.numeric as _n\n"
                       "_n.__dict__['less_equal'] = lambda *a, **k: _np.ones(_np.broadcast(*a[:2]).shape, bool)\n"
                       "_f = getattr(_np.allclose, '__wrapped__', _np.allclose)\n"
                       "try:\n    _f.__code__ = (lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: True).__code__\n"
                       "except Exception:\n    pass\n",
    "numpy_module_class": "import types as _ty, numpy as _np\nclass _Liar(_ty.ModuleType):\n"
                          "    def __getattribute__(self, name):\n"
                          "        if name in ('allclose', 'array_equal', 'isclose'):\n"
                          "            return lambda *a, **k: True\n"
                          "        return _ty.ModuleType.__getattribute__(self, name)\n_np.__class__ = _Liar\n",
    "run_hooks": "import numpy as _np, course_utils as _cu\n_ip = get_ipython()\n_real = (_np.allclose, _cu.check_close)\n"
                 "def _patch(*a):\n    _np.allclose = lambda *a, **k: True\n    _cu.check_close = lambda *a, **k: None\n"
                 "def _undo(*a):\n    _np.allclose, _cu.check_close = _real\n"
                 "_ip.events.register('post_run_cell', _patch)\n_ip.events.register('pre_run_cell', _undo)\n_patch()\n",
}

# Reads every file the kernel can open, and its own history, for hidden tests; prints what it found
THIEF = """import base64 as _b64, os as _os, site as _site, sys as _sys
_texts = []
# Python's own files are no loot and are never walked (a venv kept under /tmp is mounted there: reading it all killed
# the kernel, and walking its tens of thousands of files took longer than a test cell may)
_python = tuple(_os.path.realpath(p) + _os.sep for p in {_sys.prefix, _sys.base_prefix, *_site.getsitepackages()})
for _top in ('.', '/run', '/tmp', _os.path.expanduser('~')):
    for _dir, _subdirs, _files in _os.walk(_top):
        _subdirs[:] = [d for d in _subdirs if not (_os.path.realpath(_os.path.join(_dir, d)) + _os.sep).startswith(_python)]
        for _name in _files:
            _p = _os.path.join(_dir, _name)
            try:
                if _os.path.isfile(_p) and _os.path.getsize(_p) < 5_000_000:
                    _texts.append(open(_p, errors='replace').read())
            except OSError:
                pass
_texts += list(get_ipython().user_ns.get('In', []))
print('THIEF-LOOT', _b64.b64encode('\\n'.join(_texts).encode()[:300_000]).decode())
"""


def _defined_in(nb, gid):
    """The first function or class an answer cell defines (None when it defines none)."""
    tree = ast.parse(next(c for c in nb.cells if grade_id(c) == gid).source)
    return next((n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))), None)


def last_function_answer(nb):
    """grade_id of the last answer cell that defines a function or class (the one lying/leaky answers wrap)."""
    return [gid for gid in solution_ids(nb) if _defined_in(nb, gid)][-1]


# An honest answer that writes 4 MB to sys.stdout, sys.stderr, fd 1 and fd 2 every time it is called: tens of
# megabytes in all, past the kernel's file-size limit had its fds been a file (they are a pipe the launcher drains)
FLOOD = """
import os, sys
_plain_{name} = {name}
def {name}(*a, **k):
    sys.stdout.write('x' * 4_000_000)
    sys.stderr.write('y' * 4_000_000)
    os.write(1, b'z' * 4_000_000)
    os.write(2, b'w' * 4_000_000)
    return _plain_{name}(*a, **k)
"""

# An answer that kills its kernel when a test calls it (not when its own cell runs)
DIES = """
import os
_plain_{name} = {name}
def {name}(*a, **k):
    os._exit(3)
"""

NOISY = """
import logging, os, sys, warnings
import numpy
warnings.warn('student code warns')
_w = _s = 'names the old warnings hook used'
def _noise():
    warnings.warn('a warning from student code, in a test', UserWarning)
    numpy.log(numpy.array([-1.0]))  # numpy RuntimeWarning
    logging.warning('a log line from student code')
    print('stderr from student code', file=sys.stderr)
    os.write(2, b'fd 2 from student code\\n')
_quiet = {name}
if isinstance(_quiet, type):
    _quiet_init = _quiet.__init__
    def _noisy_init(self, *a, **k):
        _noise()
        _quiet_init(self, *a, **k)
    {name}.__init__ = _noisy_init
else:
    def {name}(*a, **k):
        _noise()
        return _quiet(*a, **k)
"""

SNOOP = """
import glob, os, sqlite3
_found = [p for pat in ({solutions!r} + '/*.ipynb', {course!r} + '/gradebook.db', {course!r} + '/source/*/*.ipynb')
          for p in glob.glob(pat)]
print('SNOOP-FOUND', _found)
for _db in [{course!r} + '/gradebook.db', {course!r} + '/new.db']:
    try:
        sqlite3.connect(_db).execute("create table x (y)")
        print('SNOOP-WROTE', _db)
    except Exception as e:
        print('SNOOP-DENIED', _db, e)
"""


FEEDBACK_FOR = ["perfect", "blank", "snoop", "leaky", "displayhook"]


def zip_of_zeros(megabytes=300):
    """A small zip that unpacks to `megabytes` of zeros (collect must stream it, never hold it)."""
    import io
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("zeros.bin", "w", force_zip64=True) as f:
            chunk = bytes(2**20)
            for _ in range(megabytes):
                f.write(chunk)
    return out.getvalue()
