"""What reaches a graded kernel's environment: grading is fast mode whatever the instructor's shell says."""
from autograder import sandbox
from course_utils.runtime import is_fast_mode


def test_nbgrader_execution_wins_over_an_instructors_course_fast_0(monkeypatch):
    monkeypatch.setenv("COURSE_FAST", "0")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert is_fast_mode()


def test_course_fast_0_still_forces_full_mode_outside_grading(monkeypatch):
    monkeypatch.setenv("COURSE_FAST", "0")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert not is_fast_mode()


def test_the_sandboxed_kernel_gets_fast_mode_and_no_other_course_variable(monkeypatch):
    monkeypatch.setenv("COURSE_FAST", "0")
    monkeypatch.setenv("COURSE_CI", "1")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    env = sandbox.kernel_env("/home/student")
    assert env["COURSE_FAST"] == "1" and "COURSE_CI" not in env and env["COURSE_DEVICE"] == "cpu"


def test_grade_uses_the_cell_timeout_plain_nbgrader_uses_unless_told_otherwise(tmp_path):
    from autograder.course import load_config
    from autograder.run import grading_config
    from autograder.sandbox.limits import Limits
    assert grading_config(tmp_path, limits=Limits()).Execute.timeout == load_config(tmp_path).Execute.timeout == 120
    assert grading_config(tmp_path, limits=Limits(cell_timeout=7)).Execute.timeout == 7
