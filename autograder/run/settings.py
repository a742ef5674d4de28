"""What a grading run is configured with: limits and nbgrader's configuration (the sandbox's allow-list is
autograder.sandbox.policy's)."""
from ..course import load_config
from ..sandbox.limits import HARD_LIMIT_GRACE_S, Limits  # noqa: F401: declared there, once



def grading_config(course_root, db_url=None, limits=Limits(), sandbox_settings=None):
    """The course's nbgrader config (which also hides hidden tests in feedback) plus sandboxed execution."""
    config = load_config(course_root)
    if db_url:
        config.CourseDirectory.db_url = db_url
    if limits.cell_timeout is not None:  # else nbgrader_config.py's, the one plain nbgrader uses too
        config.Execute.timeout = limits.cell_timeout
    config.Execute.iopub_timeout = 30  # output still arriving after the reply on a busy machine
    config.SandboxedExecute.notebook_timeout = limits.notebook_timeout
    config.SandboxedExecute.max_output_bytes = limits.output_kb * 1024
    if sandbox_settings is not None:
        config.SandboxKernelManager.sandbox = sandbox_settings
    # nbgrader_config.py's preprocessors (the pass/fail rule, restored metadata), with the sandboxed kernel
    config.Autograde.autograde_preprocessors = [
        "autograder.preprocessors.SandboxedExecute" if p == "autograder.preprocessors.GradingExecute" else p
        for p in config.Autograde.autograde_preprocessors]
    return config
