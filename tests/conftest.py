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
