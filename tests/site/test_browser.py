"""Students' browsers: every lesson run in JupyterLab 4 (one also in Notebook 7) in headless Chromium.

For each lesson, once: its release copy filled with the solutions is opened, Run > Run All Cells,
wait until every cell has run, check no cell shows a traceback, change a slider or a dropdown in
every explorer and check what it displays changes, then save with Ctrl+S. The saved copy must
keep every cell, its id and its nbgrader metadata, and the copies of the first and last lessons,
graded together with `python -m autograder grade --jobs 2`, must get full marks (the round trip). Console errors
(widgets failing to render, uncaught exceptions) fail the test. Screenshots and console logs go
to test-artifacts/browser/.

The default run takes one lesson through JupyterLab (tests/full_run.py: LAB_LESSON); `--full` every lesson,
Notebook 7 and the round trip. Needs /usr/bin/chromium (apt-get install chromium) and `pip install playwright`;
skipped without them, except under COURSE_CI=1 (.ci/run), where a missing prerequisite fails.
"""
import os
import shutil

import nbformat
import pytest

from autograder.run import grade
from tests import browser as b
from tests.full_run import selected_lessons
from tests.graded_class import LIMITS
from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, load, submit

_missing = b.missing_prerequisite()
if _missing and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"browser tests cannot run under COURSE_CI=1: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"browser tests skipped: {_missing}")

NOTEBOOK7_LESSON = "01_seq2seq_bottleneck"
# lessons whose JupyterLab-saved copy is graded end to end; every other lesson's saved copy is checked to hold
# exactly the graded content of its filled-in copy (cells, ids, sources, nbgrader metadata), which the graded
# class (tests/graded_class.py) grades full marks as its `complete` submission
ROUND_TRIP = (LESSONS[0], LESSONS[-1])
# lessons run in JupyterLab at once: while one is explored (its waits for a quiet kernel and a quiet explorer), the
# other's kernel runs (three at once took as long on two cores)
AT_ONCE = 2


@pytest.fixture(scope="module")
def artifacts():
    b.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return b.ARTIFACTS


@pytest.fixture(scope="module")
def lab(tmp_path_factory, artifacts):
    work = tmp_path_factory.mktemp("lab")
    root = work / "root"
    root.mkdir()
    with b.jupyter_server("lab", root, work, artifacts / "jupyterlab-server.log") as server:
        yield server


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with b.browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


def explorer_cells(lesson):
    return [c for c in load(SOLUTIONS / f"{lesson}.ipynb").cells
            if c.cell_type == "code" and "course_utils.explorers" in c.source]


def _open_and_run(server, chromium, url_path, page=None):
    """Open a notebook (in a new page, or in the JupyterLab `page` already shows) and start Run All; what _finish
    needs."""
    if page is None:
        page = chromium.new_page()
        console = b.ConsoleLog(page, server.app)
        page.goto(server.url(url_path))
    else:
        console = b.ConsoleLog(page, server.app)
        b.open_next(page, url_path.removeprefix("lab/tree/"))
    b.start_run_all(page)
    return dict(page=page, console=console)


def _finish(server, run, shots, save_as=None, keep_page=False):
    """Wait for the run, poke every explorer, save with Ctrl+S to `save_as` if given; what the tests check.
    With `keep_page`, the page stays open (and its console log listening) for the next notebook."""
    page, console = run.pop("page"), run["console"]
    try:
        cells = b.wait_run_all(page)
        page.screenshot(path=f"{shots}_after_run_all.png")
        count, _changed, problems = b.exercise_explorers(page, shots)
        page.screenshot(path=f"{shots}_end.png")
        if save_as:
            b.save_with_keyboard(page, server, save_as)
        return dict(run, cells=cells, tracebacks=[(i, e) for i, c in enumerate(cells) for e in c["errors"]],
                    count=count, problems=problems)
    except Exception:
        page.screenshot(path=f"{shots}_FAILED.png")
        keep_page = False
        raise
    finally:
        console.write(f"{shots}_console.log")
        if not keep_page:
            console.close()
            page.close()


@pytest.fixture(scope="module")
def lab_runs(request, lab, chromium, artifacts, released_course):
    """{lesson: what happened}: each lesson of this run's tests (every lesson in the full run, LAB_LESSON in the
    default one; tests/full_run.py) its filled-in release copy run, explored and saved in JupyterLab, AT_ONCE
    lessons at a time (a page and a kernel each: the others run while one is explored). Each page goes on to its
    next lesson in the JupyterLab it has loaded, as a student opens the next notebook."""
    lessons = selected_lessons(request, "lab_runs")
    runs, pages = {}, [None] * AT_ONCE
    for group in (lessons[i:i + AT_ONCE] for i in range(0, len(lessons), AT_ONCE)):
        started = {}
        for slot, lesson in enumerate(group):
            try:
                filled = fill_solutions(load(released_course / "release" / lesson / f"{lesson}.ipynb"),
                                        load(SOLUTIONS / f"{lesson}.ipynb"))
                nbformat.write(filled, str(lab.root / f"{lesson}.ipynb"))
                started[lesson] = dict(_open_and_run(lab, chromium, f"lab/tree/{lesson}.ipynb", pages[slot]),
                                       filled=filled, slot=slot)
                pages[slot] = started[lesson]["page"]
            except Exception as e:  # noqa: BLE001: this lesson's test reports it; the others still run
                runs[lesson] = dict(error=e)
                pages[slot] = _closed(pages[slot])
        for lesson, run in started.items():
            slot = run.pop("slot")
            try:
                runs[lesson] = _finish(lab, run, str(artifacts / f"lab_{lesson}"), save_as=f"{lesson}.ipynb",
                                       keep_page=True)
                runs[lesson]["saved"] = load(lab.root / f"{lesson}.ipynb")
            except Exception as e:  # noqa: BLE001
                runs[lesson] = dict(error=e)
                pages[slot] = _closed(pages[slot])  # the next lesson on this slot gets a new page
        for lesson in started:  # what a page says from here on (its notebook closing too) is its next lesson's
            if "console" in runs[lesson]:
                runs[lesson]["console"].close()
        lab.shutdown_kernels()
    for page in pages:
        _closed(page)
    return runs


def _closed(page):
    if page is not None and not page.is_closed():
        page.close()
    return None


@pytest.fixture(scope="module")
def round_trip(lab_runs, released_course, tmp_path_factory):
    """{lesson: grading result} of the copies JupyterLab saved, graded together as a class of one student."""
    saved = {lesson: run["saved"] for lesson, run in lab_runs.items() if "saved" in run and lesson in ROUND_TRIP}
    if not saved:  # no lesson of the round trip in this run (the default run's LAB_LESSON is none of them)
        return {}
    course = tmp_path_factory.mktemp("round-trip") / "course"
    shutil.copytree(released_course, course)
    for lesson, nb in saved.items():
        submit(course, lesson, "browser", nb)
    return {r.lesson: r for r in grade(course, jobs=2, limits=LIMITS, log=lambda *_: None)}


def _run(lab_runs, lesson):
    run = lab_runs[lesson]
    if "error" in run:
        raise run["error"]
    return run


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_runs_in_jupyterlab_and_its_explorers_respond(lab_runs, lesson):
    run = _run(lab_runs, lesson)
    assert not run["tracebacks"], f"{lesson}: cells show tracebacks in JupyterLab: {run['tracebacks']}"
    expected = len(explorer_cells(lesson))
    assert run["count"] >= expected, (
        f"{lesson}: {expected} explorer cell(s) in the notebook but {run['count']} explorer(s) with a slider or "
        "dropdown rendered in JupyterLab (widgets failed to render?)")
    assert not run["problems"], f"{lesson}: {run['problems']}"
    assert not run["console"].errors, f"{lesson}: browser console errors:\n" + "\n".join(run["console"].errors)


def test_a_lesson_runs_in_notebook7_and_its_explorer_responds(tmp_path, chromium, artifacts):
    lesson = NOTEBOOK7_LESSON
    root = tmp_path / "root"
    b.copy_tree([SOLUTIONS / f"{lesson}.ipynb"], root)
    with b.jupyter_server("notebook", root, tmp_path, artifacts / "notebook7-server.log") as server:
        run = _finish(server, _open_and_run(server, chromium, f"notebooks/{lesson}.ipynb"),
                      str(artifacts / f"nb7_{lesson}"))
    assert not run["tracebacks"], f"{lesson}: cells show tracebacks in Notebook 7: {run['tracebacks']}"
    assert run["count"] >= len(explorer_cells(lesson)) >= 1, f"{lesson}: no explorer rendered in Notebook 7"
    assert not run["problems"], f"{lesson}: {run['problems']}"
    assert not run["console"].errors, "browser console errors:\n" + "\n".join(run["console"].errors)


@pytest.mark.parametrize("lesson", LESSONS)
def test_notebook_saved_by_jupyterlab_keeps_nbgrader_metadata_and_grades(lab_runs, round_trip, lesson):
    run = _run(lab_runs, lesson)
    filled, saved = run["filled"], run["saved"]
    assert any(c.get("outputs") for c in saved.cells if c.cell_type == "code"), \
        "the saved notebook has no outputs: JupyterLab did not save the run"
    before = [(c.get("id"), c.cell_type, c.metadata.get("nbgrader")) for c in filled.cells]
    after = [(c.get("id"), c.cell_type, c.metadata.get("nbgrader")) for c in saved.cells]
    assert after == before, f"{lesson}: JupyterLab's save changed cells, their ids or their nbgrader metadata"
    assert [c.source for c in saved.cells] == [c.source for c in filled.cells]
    if lesson not in ROUND_TRIP:
        return
    r = round_trip[lesson]
    assert r.status == "graded" and r.max_score > 0 and r.score == r.max_score, \
        f"{lesson}: the copy saved by JupyterLab scored {r.score}/{r.max_score} ({r.status})"
