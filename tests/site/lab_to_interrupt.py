"""The test run tests/test_interrupted_run.py interrupts: a notebook open in JupyterLab in Chromium, its kernel
started, as in tests/site/test_browser.py, then a wait for the Ctrl-C. Not a test module of the suite (its name
does not start with test_): the interrupting test runs it by its path, with INTERRUPT_READY naming the file it
writes once everything runs.
"""
import os
import time
from pathlib import Path

import nbformat
import pytest

from tests import browser as b


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("lab")
    root = work / "root"
    root.mkdir()
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")], metadata=kernel),
                   str(root / "wait.ipynb"))
    with b.jupyter_server("lab", root, work, work / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with b.browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


def test_wait_for_the_interrupt(lab, chromium):
    page = chromium.new_page()
    page.goto(lab.url("lab/tree/wait.ipynb"))
    page.wait_for_function(b.KERNEL_IDLE_JS, timeout=180_000, polling=500)
    Path(os.environ["INTERRUPT_READY"]).write_text(str(os.getpid()))
    time.sleep(600)
