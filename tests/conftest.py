import os

import pytest

os.environ.setdefault("COURSE_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


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
def graded_class(released_course, solution_runs, tmp_path_factory):
    """Every lesson's complete, unstarted and half-done submissions and lesson 03's hostile class, graded once
    (tests/graded_class.py)."""
    from tests.graded_class import build
    return build(released_course, solution_runs, tmp_path_factory.mktemp("class"))
