import os

import pytest

os.environ.setdefault("COURSE_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="run everything the suite checks, as .ci/run does; without it the groups tests/full_run.py "
                          "lists (each with why) are left out")


def pytest_configure(config):
    config.addinivalue_line("markers", "full(why): runs only with --full (tests/full_run.py says which and why)")
    config.addinivalue_line("markers", "students(*names): the hostile students a test of the graded class reads "
                                       "besides its `student` parameter (tests/full_run.py)")


def pytest_report_header(config):
    if config.getoption("full"):
        return "the full run: every test of the suite"
    return "the default run: `python -m pytest --full` adds what tests/full_run.py lists (as .ci/run runs it)"


@pytest.fixture(scope="session")
def released_course(tmp_path_factory):
    """A temporary nbgrader course with every lesson generated from solutions/ (notebooks/ untouched)."""
    from autograder.course import release
    from tests.nbtools import LESSONS
    root = tmp_path_factory.mktemp("course")
    release(root, LESSONS, notebooks=None, log=lambda *_: None)
    return root


@pytest.fixture(scope="session")
def solution_runs():
    """{lesson: its solution notebook run in fast mode}, through the website's cache (tools/site.py)."""
    from tests.graded_class import run_solutions
    return run_solutions()


@pytest.fixture(scope="session")
def graded_class(request, released_course, solution_runs, tmp_path_factory):
    """Every lesson's complete submission and lesson 03's hostile class, graded once (tests/graded_class.py); the
    full run's class also holds every lesson's unstarted and half-done copies, and the whole hostile class."""
    from tests.graded_class import build
    return build(released_course, solution_runs, tmp_path_factory.mktemp("class"),
                 full=request.config.getoption("full"))


# The groups xdist hands out first, in this order (pyproject.toml's addopts keep the collection's order: each worker
# starts with two groups, then takes the next as one ends). The suite is CPU-bound, except where a test of the full
# run waits (a fork bomb's 12 s, a hung kernel's timeout, a Dask worker killed, Ctrl-C): those go beside the
# mistakes, whose two processes keep both cores busy, rather than at the end, where their waits left a core idle.
# Then the long groups, so that the last to be handed out are short.
FIRST = ["tests/lessons/test_mistakes.py", "tests/autograder/test_sandbox.py", "tests/autograder/test_clock.py",
         "tests/test_interrupted_run.py", "graded_class",
         "tests/autograder/test_class.py", "tests/autograder/test_cluster.py", "tests/autograder/test_nbgrader.py",
         "tests/site/test_browser.py", "tests/site/test_site.py", "tests/site/test_colab_env.py",
         "tests/autograder/test_verdicts.py", "tests/autograder/test_formgrader.py"]


def _group(item):
    return "graded_class" if "graded_class" in item.fixturenames else item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    """The tests tests/full_run.py lists are marked `full`, and left out without --full. Under pytest-xdist
    (`--dist loadgroup`, set in pyproject.toml's addopts), the tests that read the one graded class run in one
    worker, and every other module's tests together (its module-scoped fixtures built once); the groups of FIRST
    are handed out first."""
    from tests.full_run import why_full_only
    left_out = []
    for item in items:
        why = why_full_only(item)
        if why:
            item.add_marker(pytest.mark.full(why))
            left_out.append(item)
    if left_out and not config.getoption("full"):
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("full")]
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts its collection the same way
        # the default run waits for nothing (tests/full_run.py): its longest chain, the graded class, goes first
        first = FIRST if config.getoption("full") else ["graded_class"] + [g for g in FIRST if g != "graded_class"]
        rank = {group: i for i, group in enumerate(first)}
        items.sort(key=lambda item: rank.get(_group(item), len(FIRST)))


def pytest_terminal_summary(terminalreporter):
    """How many notebook runs hung and were run again (tests/nbtools.py), counted from the warnings of every worker."""
    from tests.nbtools import HUNG
    hung = [w for w in terminalreporter.stats.get("warnings", []) if HUNG in str(getattr(w, "message", ""))]
    if hung:
        terminalreporter.write_line(f"nbtools.execute: {len(hung)} notebook run(s) hung and were run again")
