"""What a grading run is configured with: limits, nbgrader's configuration, the sandbox's allow-list."""
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .course import REPO, SOLUTIONS, load_config

HARD_LIMIT_GRACE_S = 60  # beyond the notebook budget: kernel start, sanitizing, saving grades


@dataclass
class Limits:
    cell_timeout: int = None      # seconds for one cell (None: nbgrader_config.py's Execute.timeout)
    notebook_timeout: int = 300   # seconds of execution for one notebook
    memory_mb: int = 4096         # address space of the kernel
    nproc: int = 512              # processes and threads of the sandbox user
    fsize_mb: int = 64            # largest file the kernel may write
    output_kb: int = 512          # output kept per cell



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


def sandbox_settings(course_root, limits):
    """What the kernel may read (an allow-list: the Python installation, course_utils) and its limits.

    must_not_see only feeds the probe's check that the sandbox hides them: nothing outside
    read_only (and the kernel's own submission and scratch space) is visible anyway.
    """
    import importlib.util
    course_utils = Path(importlib.util.find_spec("course_utils").origin).resolve().parent
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    inside = lambda p: any(p == q or p.startswith(q + os.sep) for q in prefixes)  # noqa: E731
    paths = {os.path.realpath(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    read_only = sorted(prefixes | {p for p in paths if not inside(p)} | {str(course_utils)})
    must_not_see = [Path(course_root).resolve(), SOLUTIONS, REPO / ".git", Path.home() / ".ssh"]
    font_cache = os.environ.get("MPLCONFIGDIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib")
    return dict(read_only=read_only, python_path=[str(course_utils.parent)], must_not_see=[str(p) for p in must_not_see], font_cache=font_cache,
                memory_mb=limits.memory_mb,
                nproc=limits.nproc, fsize_mb=limits.fsize_mb,
                cpu_s=(limits.notebook_timeout + HARD_LIMIT_GRACE_S) * (os.cpu_count() or 1))
