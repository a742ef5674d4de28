"""Colab's widget stack on a GPU runtime: every solution notebook runs, and every explorer responds, under
ipywidgets 7.7.1 and the simulated GPU.

Uses the virtual environment built by tests/colab_env/build.sh (default
build/colab-env, or $COLAB_ENV): ipywidgets 7.7.1 with widgetsnbextension 3.x,
matplotlib 3.10, numpy 2.1, Colab's ipykernel/IPython, and course_utils
installed with --no-deps. Self-learners often pick Colab's GPU runtime, so the
notebooks run under COURSE_DEVICE=sim (course_utils/device_sim.py): these runs
are also tests/lessons/test_device.py's "every lesson on a GPU" check, which runs
the lessons itself only when this environment is missing (one run, both checks).
Skipped when that environment has not been built, except under COURSE_CI=1
(.ci/run builds it first), where that fails.
"""
import os
import subprocess
from pathlib import Path

import pytest

from tests.full_run import selected_lessons
from tests.nbtools import LESSONS, REPO
from tests.prerequisites import COLAB_ENV, why_no_colab_env

PYTHON = COLAB_ENV / "bin" / "python"

_reason = why_no_colab_env()
if _reason and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"COURSE_CI=1: {_reason}")
pytestmark = pytest.mark.skipif(bool(_reason), reason=f"ipywidgets 7.7.1 tests skipped: {_reason}")


def _in_venv(code):
    done = subprocess.run([str(PYTHON), "-c", code], capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_environment_is_colabs_widget_stack_with_this_course_utils():
    versions = _in_venv("import ipywidgets, widgetsnbextension, matplotlib, numpy; "
                        "print(ipywidgets.__version__, widgetsnbextension.__version__, "
                        "matplotlib.__version__, numpy.__version__)").split()
    assert versions[0] == "7.7.1", f"ipywidgets {versions[0]}"
    assert versions[1].startswith("3."), f"widgetsnbextension {versions[1]}"
    assert versions[2].startswith("3.10."), f"matplotlib {versions[2]}"
    assert versions[3].startswith("2.1."), f"numpy {versions[3]}"
    where = _in_venv("import course_utils, os; print(os.path.dirname(course_utils.__file__))")
    assert Path(where) == REPO / "course_utils", f"the venv imports course_utils from {where}, not this checkout"


def test_every_explorer_module_imports_under_ipywidgets_7():
    modules = sorted(p.stem for p in (REPO / "course_utils" / "explorers").glob("*.py") if p.stem != "__init__")
    _in_venv("import importlib\n" + "".join(f"importlib.import_module('course_utils.explorers.{m}')\n"
                                           for m in modules))


def _check(lesson):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # two at a time on the cores: one thread each
    return subprocess.run([str(PYTHON), "tests/colab_env/check.py", lesson, "--expect-ipywidgets", "7.7.1",
                           "--simulated-gpu"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=1200, env=env)


@pytest.fixture(scope="module")
def checks(request):
    """{lesson: tests/colab_env/check.py's run}, two lessons at a time (each is its own process and kernel): the
    lessons of this run's tests (every lesson in the full run; tests/full_run.py)."""
    from concurrent.futures import ThreadPoolExecutor
    lessons = selected_lessons(request, "checks")
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(lessons, pool.map(_check, lessons)))


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_notebook_runs_and_explorers_respond_under_ipywidgets_7_on_a_simulated_gpu(checks, lesson):
    done = checks[lesson]
    assert done.returncode == 0, (f"{lesson} under ipywidgets 7.7.1 on a simulated GPU (COURSE_DEVICE=sim):\n"
                                  f"{done.stdout}\n{done.stderr[-3000:]}")
