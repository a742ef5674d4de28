"""Every lesson runs as if on a GPU: each solution notebook, in fast mode, under the simulated GPU
(COURSE_DEVICE=sim, course_utils/device_sim.py), where a tensor left on the host, a generator on the
wrong side, cuDNN's eval-mode RNN backward and float64 on the device raise as they would on CUDA or MPS.

The three crashes first seen on a real GPU are put back into their lessons here, and each must fail
its cell under the simulation: the guard is shown to catch what it is there to catch.

When the Colab stand-in is built (tests/colab_env/build.sh, as in CI), tests/site/test_colab_env.py runs every
lesson under the simulated GPU there (Colab's GPU runtime), failing on any error as this module does, and the
per-lesson runs here are skipped (one run, both checks); without it they run here, in the full run
(`--full`; tests/full_run.py): the default run runs the three crashes.
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.full_run import selected, selected_lessons
from tests.nbtools import LESSONS, SOLUTIONS, errors, execute, load
from tests.prerequisites import why_no_colab_env

SIMULATED_GPU = {"COURSE_DEVICE": "sim"}
# the Colab stand-in's check runs every lesson under the simulated GPU (tests/site/test_colab_env.py)
COLAB_RUNS_THEM = why_no_colab_env() is None

# (lesson, the fixed line, the line as it was when it crashed on an H100, what the GPU said)
KNOWN_CRASHES = {
    "01 the eval-mode GRU differentiated through cuDNN": (
        "01_seq2seq_bottleneck",
        "    return torch.backends.cudnn.flags(enabled=False)",
        "    return torch.backends.cudnn.flags(enabled=True)",
        "cudnn RNN backward can only be called in training mode"),
    "05 look-up ids made on the host": (
        "05_multi_head_attention", "x = x.to(device)\n", "", "Expected all tensors to be on the same device"),
    "07 a host generator for sampling on the device": (
        "07_transformer",
        "sample(gpt, prompt, S - 1, temperature, torch.Generator(device=device).manual_seed(1))",
        "sample(gpt, prompt, S - 1, temperature, torch.Generator().manual_seed(1))",
        "Expected a 'cuda' device type for generator"),
}


def _with_crash(lesson, fixed, broken):
    """The solution notebook with one fix undone, cut after the cell that holds it."""
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    where = [i for i, cell in enumerate(nb.cells) if fixed in cell.source]
    assert len(where) == 1, f"{lesson}: the fixed line should be in exactly one cell: {fixed!r}"
    nb.cells[where[0]].source = nb.cells[where[0]].source.replace(fixed, broken)
    nb.cells = nb.cells[:where[0] + 1]
    return nb


@pytest.fixture(scope="module")
def simulated_runs(request):
    """{lesson or crash name: executed notebook}, two at a time: the lessons and crashes of this run's tests (the
    default run's are the crashes alone; tests/full_run.py)."""
    lessons = [] if COLAB_RUNS_THEM else selected_lessons(request, "simulated_runs")
    crashes = selected(request, "simulated_runs", "name")
    jobs = {lesson: load(SOLUTIONS / f"{lesson}.ipynb") for lesson in lessons}
    jobs.update({name: _with_crash(*crash[:3]) for name, crash in KNOWN_CRASHES.items() if name in crashes})
    with ThreadPoolExecutor(2) as pool:
        runs = pool.map(lambda nb: execute(nb, fast=True, timeout=300, extra_env=SIMULATED_GPU), jobs.values())
        return dict(zip(jobs, runs))


@pytest.mark.skipif(COLAB_RUNS_THEM, reason="tests/site/test_colab_env.py runs every lesson under the simulated "
                                            "GPU in the Colab stand-in")
@pytest.mark.parametrize("lesson", LESSONS)
def test_the_solution_runs_on_a_simulated_gpu(simulated_runs, lesson):
    found = errors(simulated_runs[lesson])
    assert found == [], (f"{lesson} fails on a GPU (simulated: COURSE_DEVICE=sim): "
                         + "; ".join(f"cell {i}: {name}: {value[:300]}" for i, name, value in found))


@pytest.mark.parametrize("name", KNOWN_CRASHES)
def test_a_crash_first_seen_on_a_real_gpu_fails_the_simulated_one(simulated_runs, name):
    lesson, _, _, message = KNOWN_CRASHES[name]
    nb = simulated_runs[name]
    last = len(nb.cells) - 1
    found = errors(nb)
    assert any(i == last and message in value for i, _, value in found), (
        f"{name}: undoing the fix in {lesson} should fail its cell ({last}) with {message!r} under "
        f"COURSE_DEVICE=sim; errors: {found}")
