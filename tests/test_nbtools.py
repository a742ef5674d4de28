"""The suite's own notebook runner (tests/nbtools.py): runs made at once keep their own settings."""
import os
from concurrent.futures import ThreadPoolExecutor

import nbformat

from tests.nbtools import execute


def _printed(nb):
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_runs_made_at_once_in_threads_each_see_their_own_environment():
    """test_device.py runs notebooks two at a time in threads: one run's settings must never leak into, or be
    taken away from, another's kernel (a run that set and restored os.environ lost COURSE_DEVICE this way)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, time\ntime.sleep(0.5)\nprint(os.environ.get('COURSE_DEVICE'), os.environ.get('COURSE_FAST'))")])
    before = dict(os.environ)
    settings = [({"COURSE_DEVICE": "sim"}, True), ({}, False), ({"COURSE_DEVICE": "cpu"}, True), ({}, True)]
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda s: execute(nb, fast=s[1], extra_env=s[0]), settings))
    seen = [_printed(run).split() for run in runs]
    assert seen == [["sim", "1"], [os.environ.get("COURSE_DEVICE", "None"), "0"], ["cpu", "1"],
                    [os.environ.get("COURSE_DEVICE", "None"), "1"]], seen
    assert dict(os.environ) == before, "execute changed this process's environment"
