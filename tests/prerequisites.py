"""What some tests need from the machine, and the one rule for its absence: skip with the reason, except in
CI (COURSE_CI=1), which installs everything and must run every test."""
import os
from pathlib import Path

import pytest

from tests.nbtools import REPO

COLAB_ENV = Path(os.environ.get("COLAB_ENV", REPO / "build" / "colab-env"))


def why_no_colab_env():
    """None when the Colab stand-in (tests/colab_env/build.sh) is built for the current requirements, else why."""
    stamp, requirements = COLAB_ENV / ".complete", REPO / "tests" / "colab_env" / "requirements.txt"
    if not (COLAB_ENV / "bin" / "python").exists():
        return f"the Colab stand-in environment {COLAB_ENV} is not built: run tests/colab_env/build.sh"
    if not stamp.exists() or stamp.read_text() != requirements.read_text():
        return f"{COLAB_ENV} is incomplete or older than tests/colab_env/requirements.txt: run tests/colab_env/build.sh"
    return None


def why_no_full_sandbox():
    """None when kernels can be fully sandboxed here (root and bubblewrap), else the reason."""
    from autograder import sandbox
    if os.geteuid() != 0:
        return "the full sandbox needs root (each kernel its own uid and cgroup)"
    if not sandbox.bwrap_path():
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    return None


def require(why_not):
    """Skip the calling test (fail it in CI) when `why_not` names a missing prerequisite."""
    if why_not:
        if os.environ.get("COURSE_CI") == "1":
            pytest.fail(f"in CI this test must run: {why_not}")
        pytest.skip(why_not)
