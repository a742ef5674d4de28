"""A grading's nbgrader configuration: the course's (nbgrader_config.py), with every time and size of the grading's
Limits (sandbox/limits.py, their one home) and the sandbox's settings (sandbox/policy.py)."""
from ..course import load_config
from ..sandbox.limits import Limits


def grading_config(course_root, db_url=None, limits=Limits(), sandbox_settings=None):
    """The course's nbgrader config (which also hides hidden tests in feedback) plus sandboxed execution, with each
    trait a limit sets taken from `limits`."""
    config = load_config(course_root)
    if db_url:
        config.CourseDirectory.db_url = db_url
    config.Execute.timeout = limits.cell_timeout
    config.Execute.iopub_timeout = limits.iopub_timeout
    config.GradingExecute.check_timeout = limits.integrity_timeout
    config.SandboxedExecute.notebook_timeout = limits.notebook_timeout
    config.SandboxedExecute.max_output_bytes = limits.output_kb * 1024
    if sandbox_settings is not None:
        config.SandboxKernelManager.sandbox = sandbox_settings
    # nbgrader_config.py's preprocessors (the pass/fail rule, restored metadata), with the sandboxed kernel
    config.Autograde.autograde_preprocessors = [
        "autograder.preprocessors.SandboxedExecute" if p == "autograder.preprocessors.GradingExecute" else p
        for p in config.Autograde.autograde_preprocessors]
    return config
