"""A synthetic class through `collect`, `grade`, `feedback` and `export`: every bad submission
gets the score and the flag it deserves, and none stops the others.

The class is built from a lesson's solution: lesson 03 in the suite, the quickest to run (no
training), so that 17 executed submissions fit in a few minutes; set AUTOGRADER_TEST_LESSONS=all
or a comma list to run others. One grading run (--jobs 2), shared by the tests.
"""
import ast
import csv
import html
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import cells
from autograder.collect import collect
from autograder.feedback import export, generate_feedback
from autograder.grading import Limits, grade
from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, grade_id, load, solution_ids

QUICKEST = "03_queries_keys_values"
_chosen = os.environ.get("AUTOGRADER_TEST_LESSONS", QUICKEST if QUICKEST in LESSONS else LESSONS[0])
TEST_LESSONS = LESSONS if _chosen == "all" else [l for l in _chosen.split(",") if l in LESSONS]
LIMITS = Limits(cell_timeout=15, notebook_timeout=90, memory_mb=4096)


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


def _tests_of(nb):
    return [grade_id(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata.get("nbgrader", {}).get("solution")]


def build_class(course, lesson):
    """{student: (notebook or raw text, file name)} covering every kind of submission."""
    blank = load(course / "release" / lesson / f"{lesson}.ipynb")
    full = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"))
    ids = solution_ids(full)
    first, last = ids[0], ids[-1]
    wrapped = last_function_answer(full)
    tests = _tests_of(full)
    edited = nbformat.reads(nbformat.writes(full), as_version=4)
    next(c for c in edited.cells if grade_id(c) == tests[0]).source = "pass  # tests? what tests?"
    duplicated = nbformat.reads(nbformat.writes(full), as_version=4)
    i = next(i for i, c in enumerate(duplicated.cells) if grade_id(c) == first)
    duplicated.cells.insert(i + 1, nbformat.from_dict(json.loads(json.dumps(duplicated.cells[i]))))
    duplicated.cells[i + 1]["id"] = "duplicated-cell"
    twin = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"), ids[1:])
    name = f"{lesson}.ipynb"
    return {
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
THIEF = """import base64 as _b64, glob as _glob, os as _os
_texts = []
for _pattern in ('**/*', '/run/**/*', '/tmp/**/*', _os.path.expanduser('~') + '/**/*'):
    for _p in _glob.glob(_pattern, recursive=True):
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


def _zip_of_zeros(megabytes=300):
    """A small zip that unpacks to `megabytes` of zeros (collect must stream it, never hold it)."""
    import io
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("zeros.bin", "w", force_zip64=True) as f:
            chunk = bytes(2**20)
            for _ in range(megabytes):
                f.write(chunk)
    return out.getvalue()


@pytest.fixture(scope="module", params=TEST_LESSONS)
def graded(request, released_course, tmp_path_factory):
    """The class collected from a zip, graded with --jobs 2, exported, with feedback."""
    lesson = request.param
    tmp = tmp_path_factory.mktemp("class")
    course = tmp / "course"
    shutil.copytree(released_course, course)
    students = build_class(course, lesson)
    bundle = tmp / "downloads.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        for student, (nb, filename) in students.items():
            text = nb if isinstance(nb, str) else nbformat.writes(nb)
            z.writestr(f"{student}/{filename}", text)
        z.writestr("perfect/notes.txt", "not a notebook")
        link = zipfile.ZipInfo(f"linked/{lesson}.ipynb")  # a symbolic link entry to the solutions
        link.external_attr = (0o120777 << 16)
        z.writestr(link, str(SOLUTIONS / f"{lesson}.ipynb"))
        z.writestr("bomb/zeros.zip", _zip_of_zeros())
    collected = collect(bundle, course, LESSONS, log=lambda *_: None)
    results = {r.student: r for r in grade(course, [lesson], jobs=2, limits=LIMITS, log=print)}
    grades_csv, summary = export(course, tmp / "export", log=lambda *_: None)
    feedback = generate_feedback(course, [lesson], FEEDBACK_FOR, log=lambda *_: None)
    return dict(lesson=lesson, course=course, students=students, collected=collected, results=results,
                grades_csv=grades_csv, summary=summary, feedback=feedback)


def max_points(g):
    return g["results"]["perfect"].max_score


def points_of_last(g):
    """Points of the test cell of the last exercise (the one the bad cells break)."""
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    return [c.metadata["nbgrader"]["points"] for c in source.cells if grade_id(c) == _tests_of(source)[-1]][0]


def points_of_test_after(g):
    """Points of the first test cell after the answer cell last_function_answer() picks."""
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    gid = last_function_answer(source)
    cells = source.cells[[grade_id(c) for c in source.cells].index(gid):]
    return next(c.metadata["nbgrader"]["points"] for c in cells if grade_id(c) in _tests_of(source))


def autograded(g, student):
    return load(g["course"] / "autograded" / student / g["lesson"] / f"{g['lesson']}.ipynb")


def test_collect_places_every_student_and_reports_the_stray_file(graded):
    placed = {student for _, student, _, _ in graded["collected"].placed}
    assert placed == set(graded["students"])
    problems = dict(graded["collected"].problems)
    assert problems.pop("perfect/notes.txt") == "not a notebook (.ipynb)"
    skipped = " ".join(f"{source}: {reason}" for source, reason in graded["collected"].skipped)
    assert "linked/" in skipped and "symbolic link" in skipped  # listed, never followed into solutions/
    assert not any("linked" in student for _, student, _, _ in graded["collected"].placed)
    assert problems and all(source.startswith("bomb/") for source in problems), problems  # too big, or no notebook


def test_every_student_is_graded_and_in_the_csv(graded):
    assert set(graded["results"]) == set(graded["students"])
    with open(graded["grades_csv"]) as f:
        rows = list(csv.DictReader(f))
    assert {r["student_id"] for r in rows} == set(graded["students"])
    assert list(rows[0])[:4] == ["assignment", "duedate", "timestamp", "student_id"]


@pytest.mark.parametrize("student", ["perfect", "colab_renamed", "edited_test", "duplicated_cell",
                                     "giant_output", "stderr_warnings", "always_equal", "snoop", "leaky",
                                     "tampered", "tampered_colab", "huge", "markdown_test", "loop_i"])
def test_full_marks(graded, student):
    r = graded["results"][student]
    assert r.status == "graded" and r.score == max_points(graded), r


@pytest.mark.parametrize("student", ["blank", "invalid_json", "monkeypatch"])
def test_zero(graded, student):
    assert graded["results"][student].score == 0, graded["results"][student]


def test_partial_scores_in_between(graded):
    assert 0 < graded["results"]["partial"].score < max_points(graded)


@pytest.mark.parametrize("student", ["syntax_error", "infinite_loop", "memory_bomb", "os_exit", "sys_exit",
                                     "deleted_test"])
def test_breaking_the_last_exercise_loses_only_its_points(graded, student):
    r = graded["results"][student]
    assert r.score == max_points(graded) - points_of_last(graded), r


@pytest.mark.parametrize("student, flag", [("monkeypatch", "patch:"), ("always_equal", "eq:"), ("snoop", "reach:"),
                                           ("deleted_test", "was deleted"), ("edited_test", "was edited"),
                                           ("duplicated_cell", "appears 2 times"), ("invalid_json", "invalid:"),
                                           ("os_exit", "kernel died"), ("huge", "size:"),
                                           ("markdown_test", "turned into a markdown cell")])
def test_flagged_for_review(graded, student, flag):
    flags = graded["results"][student].flags
    assert any(flag in f for f in flags), flags
    assert student in graded["summary"].read_text()


@pytest.mark.parametrize("student", ["perfect", "blank", "partial", "colab_renamed", "stderr_warnings", "loop_i"])
def test_honest_submissions_are_not_flagged(graded, student):
    assert graded["results"][student].flags == []


def test_infinite_loop_is_stopped_by_the_cell_timeout(graded):
    assert any("timed out" in e for e in graded["results"]["infinite_loop"].events)


def test_giant_output_is_truncated(graded):
    path = graded["course"] / "autograded" / "giant_output" / graded["lesson"] / f"{graded['lesson']}.ipynb"
    assert path.stat().st_size < 2_000_000


def test_kernel_cannot_see_or_write_grader_files(graded):
    text = json.dumps([o for c in autograded(graded, "snoop").cells for o in c.get("outputs", [])])
    assert "SNOOP-FOUND []" in text, text[:2000]
    assert "SNOOP-DENIED" in text and "SNOOP-WROTE" not in text, text[:2000]


def test_feedback_does_not_reveal_hidden_tests(graded):
    source = load(graded["course"] / "source" / graded["lesson"] / f"{graded['lesson']}.ipynb")
    hidden = [line.strip() for c in source.cells for block in c.source.split("### BEGIN HIDDEN TESTS")[1:]
              for line in block.split("### END HIDDEN TESTS")[0].splitlines() if len(line.strip()) >= 12]
    release = (graded["course"] / "release" / graded["lesson"] / f"{graded['lesson']}.ipynb").read_text()
    visible = {line.strip() for c in load(graded["course"] / "release" / graded["lesson"] / f"{graded['lesson']}.ipynb").cells
               for line in c.source.splitlines()}
    hidden = [line for line in hidden if line not in visible and release]
    assert hidden and len(graded["feedback"]) == len(FEEDBACK_FOR)
    for page in graded["feedback"]:
        lines = {line.strip() for line in html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).splitlines()}
        leaked = [line for line in hidden if line in lines]  # whole lines: `s = ...` is in `scores = ...`
        assert not leaked, f"{page}: {leaked[:3]}"


def test_student_warnings_are_shown_but_cost_nothing(graded):
    """Warnings, log lines, sys.stderr and fd 2 from a correct answer while a test runs cost nothing, and
    never reach the test cell: the student's code runs inside the grader's requests, whose output is dropped."""
    nb = autograded(graded, "stderr_warnings")
    answer_text = json.dumps([o for c in nb.cells if not cells.is_test(c) for o in c.get("outputs", [])])
    assert "student code warns" in answer_text  # outside the tests, the student sees their warning
    tests = [c for c in nb.cells if cells.is_test(c)]
    assert all(c.outputs == [] for c in tests), [c.outputs for c in tests if c.outputs]
    test_text = json.dumps([c.get("metadata", {}) for c in tests]) + json.dumps([c.outputs for c in tests])
    for noise in ("a warning from student code, in a test", "a log line from student code",
                  "stderr from student code", "fd 2 from student code"):
        assert noise not in test_text, noise
    assert graded["results"]["stderr_warnings"].score == max_points(graded)


def _csv_row(g, student):
    with open(g["grades_csv"]) as f:
        return next(r for r in csv.DictReader(f) if r["student_id"] == student and r["assignment"] == g["lesson"])


# student: (score: "zero" | "all but wrapped" | "full", substrings that must be among the flags); "wrapped" is
# the test of last_function_answer, whose answer the lying student wraps
CHEATS = {
    "displayhook": ("zero", ["kernel: line", "uses .displayhook"]),
    "lying": ("all but wrapped", ["lie: line", "subclasses float", "subclasses Tensor", "subclasses ndarray"]),
    "rebind": ("full", ["integrity: course_utils.check_close was replaced",
                        "integrity: course_utils.checks.plain_float was replaced",
                        "integrity: torch.allclose was replaced", "first seen after test cell"]),
    "deep_patch": ("full", ["patch: line", "integrity: course_utils.check_true had its code or defaults changed",
                            "kernel: line", "integrity: an IPython AST transformer was added or removed"]),
    "leaky": ("full", ["introspect: line", "uses ._getframe", "names 'In'"]),
    "tampered": ("full", ["tamper: cell", "(bonus): claims nbgrader metadata",
                          "(softmax): nbgrader metadata was changed (grade True -> False, points 100 -> 0)",
                          "(test_renamed): nbgrader metadata was changed (grade_id 'test_renamed'"]),
    "tampered_colab": ("full", ["tamper: cell", "(bonus): claims nbgrader metadata",
                                "nbgrader metadata was changed (grade True -> False, points 100 -> 0)",
                                "(test_renamed): nbgrader metadata was changed (grade_id 'test_renamed'"]),
}


@pytest.mark.parametrize("student", sorted(CHEATS))
def test_cheats_get_the_exact_score_the_flag_and_the_csv_row(graded, student):
    kind, expected_flags = CHEATS[student]
    if student.startswith("tampered") and graded["lesson"] != QUICKEST:  # the flags name lesson 03's cells
        expected_flags = expected_flags[:1]
    full = max_points(graded)
    score = {"zero": 0, "all but wrapped": full - points_of_test_after(graded), "full": full}[kind]
    r = graded["results"][student]
    assert (r.status, r.score, r.max_score) == ("graded", score, full), r
    text = "\n".join(r.flags)
    assert all(f in text for f in expected_flags), (expected_flags, r.flags)
    row = _csv_row(graded, student)
    assert (float(row["score"]), float(row["max_score"])) == (score, full), row
    assert student in graded["summary"].read_text()


def test_a_display_result_in_a_test_cell_earns_nothing(graded):
    """nbgrader reads a test cell's execute_result as partial credit: a test cell keeps only its error, and
    what the student's code displays during a test never reaches it."""
    for cell in (c for c in autograded(graded, "displayhook").cells if cells.is_test(c)):
        assert [o.output_type for o in cell.outputs] == ["error"], cell.outputs
        assert "full marks" not in json.dumps(cell.outputs) + json.dumps(cell.metadata)


def test_patched_checks_change_no_verdict_and_cost_no_honest_point(graded):
    """The tests run on the grader's side: a patched check in the kernel neither passes nor fails a test."""
    for student in ("rebind", "deep_patch"):
        tests = [c for c in autograded(graded, student).cells if cells.is_test(c)]
        assert tests and all(c.outputs == [] for c in tests), (student, [c.outputs for c in tests if c.outputs])


@pytest.mark.parametrize("student", sorted(KERNEL_PATCHES) + ["thief"])
def test_a_patch_in_the_kernel_earns_exactly_what_its_honest_twin_earns(graded, student):
    twin, r = graded["results"]["honest_twin"], graded["results"][student]
    assert 0 < twin.score < twin.max_score, twin
    assert (r.status, r.score, r.max_score) == ("graded", twin.score, twin.max_score), r
    row = _csv_row(graded, student)
    assert (float(row["score"]), float(row["max_score"])) == (twin.score, twin.max_score), row


def _hidden_lines(g):
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    visible = {line.strip() for c in load(g["course"] / "release" / g["lesson"] / f"{g['lesson']}.ipynb").cells
               for line in c.source.splitlines()}
    hidden = [line.strip() for c in source.cells for block in c.source.split("### BEGIN HIDDEN TESTS")[1:]
              for line in block.split("### END HIDDEN TESTS")[0].splitlines() if len(line.strip()) >= 12]
    return [line for line in hidden if line not in visible]


def test_no_file_the_kernel_can_open_and_nothing_in_its_history_holds_a_hidden_test(graded):
    import base64
    text = json.dumps([o for c in autograded(graded, "thief").cells for o in c.get("outputs", [])])
    loot = base64.b64decode(re.search(r"THIEF-LOOT ([A-Za-z0-9+/=]+)", text).group(1)).decode(errors="replace")
    assert f"{graded['lesson']}.ipynb" in loot or "nbformat" in loot, "the thief read nothing: the probe is broken"
    lines = {line.strip() for line in loot.splitlines()}
    own = {line.strip() for c in graded["students"]["thief"][0].cells for line in c.source.splitlines()}
    hidden = [line for line in _hidden_lines(graded) if line not in own]  # a line of the answers is no secret
    assert hidden and not [line for line in hidden if line in lines or json.dumps(line)[1:-1] in loot]


def test_feedback_shows_no_output_of_student_code_during_tests_and_no_active_html(graded):
    page = next(p for p in graded["feedback"] if "/leaky/" in str(p)).read_text()
    for printed in ("B64 ", "REV ", "SPACED ", "HTML "):  # what the student's code printed during hidden tests
        assert printed not in html.unescape(re.sub(r"<[^>]+>", "", page)), printed
    assert not re.search(r"<script[^>]*>[^<]*window\.PWNED", page), "a script of the student's reached the page"
    assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", page), "an event handler attribute reached the page"
    assert "My notes" in page  # the student's own Markdown still shows, sanitised


def test_feedback_of_a_failed_test_shows_the_error_message_only(graded):
    page = next(p for p in graded["feedback"] if "/displayhook/" in str(p)).read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "NotImplementedError" in text and "full marks, please" not in text


def test_a_dead_kernel_is_one_flag(graded):
    flags = graded["results"]["os_exit"].flags
    assert [f for f in flags if f.startswith("runtime:")] == [
        f for f in flags if f.startswith("runtime: the kernel died")] and len(flags) == 1, flags


def test_a_worker_past_the_hard_limit_is_killed_scored_zero_and_flagged(released_course, tmp_path, monkeypatch):
    import autograder.grading
    lesson = TEST_LESSONS[0]
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    folder = course / "submitted" / "stuck" / lesson
    folder.mkdir(parents=True)
    shutil.copyfile(course / "release" / lesson / f"{lesson}.ipynb", folder / f"{lesson}.ipynb")
    monkeypatch.setattr(autograder.grading, "HARD_LIMIT_GRACE_S", 0)  # a 1 s hard limit: a worker needs longer to start a kernel
    [r] = grade(course, [lesson], limits=Limits(notebook_timeout=1), log=lambda *_: None)
    assert r.status == "failed" and r.score == 0 and r.max_score > 0, r
    assert any("hard limit" in f for f in r.flags), r.flags
    assert list((course / ".grading" / lesson / "stuck").glob("worker.log")), "the worker's log is kept for review"


def _processes_with(marker):
    """Process ids whose environment holds `marker` (the grading parent, its workers, and their kernels)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (proc / "environ").read_bytes() and b"State:\tZ" not in (proc / "status").read_bytes():
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def _alive(pid):
    try:
        return b"State:\tZ" not in Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return False


def test_ctrl_c_stops_workers_and_kernels_keeps_finished_grades_and_a_rerun_resumes(released_course, tmp_path):
    """SIGINT to `python -m autograder grade` mid-run: nothing keeps running, the finished grade stays, the rest
    is named, and running grade again grades only the rest."""
    import signal
    import subprocess
    import sys
    import time
    import uuid
    lesson = TEST_LESSONS[0]
    course = tmp_path / "course"
    shutil.copytree(released_course, course)
    full = fill_solutions(load(course / "release" / lesson / f"{lesson}.ipynb"), load(SOLUTIONS / f"{lesson}.ipynb"))
    for student in ("first", "second", "third"):
        folder = course / "submitted" / student / lesson
        folder.mkdir(parents=True)
        nbformat.write(full, str(folder / f"{lesson}.ipynb"))
    marker = f"COURSE_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    cmd = [sys.executable, "-m", "autograder", "grade", lesson, "--course", str(course), "--jobs", "1"]
    proc = subprocess.Popen(cmd, env=env, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    kernels = course / ".grading" / lesson / "second" / "kernels.txt"
    deadline = time.monotonic() + 400
    while not (kernels.exists() and kernels.read_text().strip()) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert kernels.exists(), "the second submission's kernel never started"
    kernel_pids = [int(p) for p in kernels.read_text().split()]
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    time.sleep(2)  # let killed processes be reaped
    assert not [p for p in kernel_pids if _alive(p)], "a kernel outlived the interrupted grade"
    assert _processes_with(marker) == [], "a worker or kernel outlived the interrupted grade"
    assert "not graded: " in out and f"{lesson} second" in out and f"{lesson} third" in out, out
    reports = sorted(p.stem for p in (course / "reports" / lesson).glob("*.json"))
    assert reports == ["first"], reports
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        first = gb.find_submission(lesson, "first")
        assert first.score == first.max_score > 0

    again = subprocess.run(cmd, env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skipping 1 submission(s) already graded" in again.stdout, again.stdout
    regraded = {line.split()[1].rstrip(":") for line in again.stdout.splitlines() if line.startswith(lesson)}
    assert regraded == {"second", "third"}, again.stdout
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert all(gb.find_submission(lesson, s).score == gb.find_submission(lesson, s).max_score
                   for s in ("first", "second", "third"))
