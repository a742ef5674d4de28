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

import nbformat
import pytest

from autograder.collect import collect
from autograder.feedback import export, generate_feedback
from autograder.grading import Limits, grade
from nbtools import LESSONS, SOLUTIONS, fill_solutions, grade_id, load, solution_ids

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
    tests = _tests_of(full)
    edited = nbformat.reads(nbformat.writes(full), as_version=4)
    next(c for c in edited.cells if grade_id(c) == tests[0]).source = "pass  # tests? what tests?"
    duplicated = nbformat.reads(nbformat.writes(full), as_version=4)
    i = next(i for i, c in enumerate(duplicated.cells) if grade_id(c) == first)
    duplicated.cells.insert(i + 1, nbformat.from_dict(json.loads(json.dumps(duplicated.cells[i]))))
    duplicated.cells[i + 1]["id"] = "duplicated-cell"
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
    }


def _defined_in(nb, gid):
    """The first function or class an answer cell defines."""
    tree = ast.parse(next(c for c in nb.cells if grade_id(c) == gid).source)
    return next(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)))


NOISY = """
import warnings
warnings.warn('student code warns')
_quiet = {name}
if isinstance(_quiet, type):
    _quiet_init = _quiet.__init__
    def _noisy_init(self, *a, **k):
        warnings.warn('a warning from student code, in a test')
        _quiet_init(self, *a, **k)
    {name}.__init__ = _noisy_init
else:
    def {name}(*a, **k):
        warnings.warn('a warning from student code, in a test')
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
    collected = collect(bundle, course, LESSONS, log=lambda *_: None)
    results = {r.student: r for r in grade(course, [lesson], jobs=2, limits=LIMITS, log=print)}
    grades_csv, summary = export(course, tmp / "export", log=lambda *_: None)
    feedback = generate_feedback(course, [lesson], ["perfect", "blank", "snoop"], log=lambda *_: None)
    return dict(lesson=lesson, course=course, students=students, collected=collected, results=results,
                grades_csv=grades_csv, summary=summary, feedback=feedback)


def max_points(g):
    return g["results"]["perfect"].max_score


def points_of_last(g):
    """Points of the test cell of the last exercise (the one the bad cells break)."""
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    return [c.metadata["nbgrader"]["points"] for c in source.cells if grade_id(c) == _tests_of(source)[-1]][0]


def autograded(g, student):
    return load(g["course"] / "autograded" / student / g["lesson"] / f"{g['lesson']}.ipynb")


def test_collect_places_every_student_and_reports_the_stray_file(graded):
    placed = {student for _, student, _, _ in graded["collected"].placed}
    assert placed == set(graded["students"])
    assert graded["collected"].problems == [("perfect/notes.txt", "not a notebook (.ipynb)")]


def test_every_student_is_graded_and_in_the_csv(graded):
    assert set(graded["results"]) == set(graded["students"])
    with open(graded["grades_csv"]) as f:
        rows = list(csv.DictReader(f))
    assert {r["student_id"] for r in rows} == set(graded["students"])
    assert list(rows[0])[:4] == ["assignment", "duedate", "timestamp", "student_id"]


@pytest.mark.parametrize("student", ["perfect", "colab_renamed", "edited_test", "duplicated_cell",
                                     "giant_output", "stderr_warnings", "always_equal", "snoop"])
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
                                           ("os_exit", "kernel died")])
def test_flagged_for_review(graded, student, flag):
    flags = graded["results"][student].flags
    assert any(flag in f for f in flags), flags
    assert student in graded["summary"].read_text()


@pytest.mark.parametrize("student", ["perfect", "blank", "partial", "colab_renamed", "stderr_warnings"])
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
    assert hidden and len(graded["feedback"]) == 3
    for page in graded["feedback"]:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page}: {leaked[:3]}"


def test_student_warnings_are_shown_but_cost_nothing(graded):
    text = json.dumps([o for c in autograded(graded, "stderr_warnings").cells for o in c.get("outputs", [])])
    assert "a warning from student code, in a test" in text
    assert graded["results"]["stderr_warnings"].score == max_points(graded)


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
    monkeypatch.setattr(autograder.grading, "HARD_LIMIT_GRACE_S", 1)
    [r] = grade(course, [lesson], limits=Limits(notebook_timeout=1), log=lambda *_: None)
    assert r.status == "failed" and r.score == 0 and r.max_score > 0, r
    assert any("hard limit" in f for f in r.flags), r.flags
    assert list((course / ".grading" / lesson / "stuck").glob("worker.log")), "the worker's log is kept for review"
