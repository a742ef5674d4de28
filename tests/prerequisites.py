"""What some tests need from the machine, and the one rule for its absence: skip with the reason, except in
CI (COURSE_CI=1), which installs everything and must run every test."""
import os

import pytest


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
