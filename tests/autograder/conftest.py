import pytest


@pytest.fixture(scope="session")
def tiny_course(tmp_path_factory):
    """A released course of one small lesson (tests/autograder/tiny.py: two exercises, a 3-second given cell),
    for the tests of grading's machinery that need no real lesson: a few seconds a submission."""
    from autograder.course import release
    from tests.autograder import tiny
    solutions = tmp_path_factory.mktemp("tiny-solutions")
    tiny.write_lesson(solutions / f"{tiny.LESSON}.ipynb")
    course = tmp_path_factory.mktemp("tiny") / "course"
    release(course, [tiny.LESSON], solutions=solutions, notebooks=None, log=lambda *_: None)
    return course
