"""What only the full run checks, and why: `python -m pytest --full` (what .ci/run runs) against `python -m pytest`.

The default run is the one a developer runs between commits: something of every test module, every lesson's
solution run in fast mode and graded (its test cells on the grader's side), the sandbox, a small hostile class,
JupyterLab on one lesson, the website. The full run adds what is expensive and rarely informative between
commits: each rule below names a group of tests, what makes it expensive, and when it is informative. Nothing
is only in the default run, and no test is lost: `python -m pytest --full --collect-only -q` lists the whole suite.

A rule marks its tests `full` (tests/conftest.py), so `-m full` and `-m "not full"` choose them too. Fixtures
that build something per lesson build it only for the lessons of the tests selected (`selected_lessons`): the
default run's one JupyterLab lesson starts one notebook, and `-k 03_` runs lesson 03 alone there.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from tests.nbtools import LESSONS

# the lesson the default run takes through JupyterLab: the quickest to run (no training), with explorers
LAB_LESSON = "03_queries_keys_values"
# the pages of the website the default run checks in Chromium (loads offline, axe-core): the home page and one
# lesson's
SITE_PAGES = ("index", f"lessons/{LAB_LESSON}")


def _param(item, name):
    return getattr(item, "callspec", None) and item.callspec.params.get(name)


def _lesson(item):
    return _param(item, "lesson")


@dataclass(frozen=True)
class Rule:
    path: str                                      # the test file
    why: str                                       # what makes the group expensive, and when it is informative
    tests: tuple = ()                              # its test functions (every test of the file when empty)
    keep: Optional[Callable] = None                # item -> True for the tests of the group the default run keeps

    def applies(self, item):
        if item.nodeid.split("::")[0] != self.path:
            return False
        if self.tests and getattr(item, "originalname", item.name) not in self.tests:
            return False
        return not (self.keep and self.keep(item))


RULES = [
    Rule("tests/lessons/test_mistakes.py",
         "each of the 1,400-odd cases runs every graded test cell of its lesson with one answer replaced (the "
         "`verdicts` fixture: about 10 CPU-minutes, 2.5 minutes of the suite on two cores): informative when a "
         "lesson's test cells or its mistakes data change, which `python -m tests.mistakes.report NN` shows for "
         "one lesson; the data's own rule (test_most_mistakes_are_named) needs no run and stays",
         tests=("test_mistake_is_caught", "test_mistake_costs_only_its_own_exercise", "test_other_correct_answer_passes",
                "test_mistake_is_named")),
    Rule("tests/lessons/test_grading.py",
         "the unstarted and half-done copies are two more gradings of every lesson (22 kernels, each lesson's "
         "notebook run again): informative when a lesson's exercises or the release step change; the complete "
         "copies, graded in the default run, are the fast-mode check of every lesson",
         tests=("test_an_unstarted_copy_earns_zero", "test_a_half_done_copy_earns_some_of_the_points",
                "test_an_unstarted_copy_fails_only_where_exercises_are_unfinished")),
    Rule("tests/autograder/test_class.py",
         "the rest of the hostile class (tests/autograder/hostile.py; FAST_CLASS is the default run's): thirty-odd "
         "more gradings of lesson 03, several of which wait out a limit (an endless loop, a memory bomb, a flood), "
         "and Ctrl-C during a grading, which waits for a kernel and grades twice: informative when the grader's "
         "defences or its interruption change",
         keep=lambda item: item.originalname != "test_ctrl_c_stops_workers_and_kernels_keeps_finished_grades_and_a_"
                                                 "rerun_resumes" and _fast_class_suffices(item)),
    Rule("tests/site/test_browser.py",
         "each lesson run, explored and saved in JupyterLab in Chromium (about 5 minutes of the suite), Notebook 7 "
         "and the saved copies graded again: informative when the widgets, JupyterLab's pin or a lesson's "
         "explorers change; the default run takes lesson 03 through JupyterLab",
         keep=lambda item: _lesson(item) == LAB_LESSON),
    Rule("tests/site/test_site.py",
         "every page of the website loaded in Chromium and checked by axe-core, the next/previous walk and the "
         "search (about 2 seconds of Chromium a page, 20-odd pages): informative when the theme, the site's "
         "configuration or a page's markup change; the default run builds the site and checks every page's "
         "text, and loads and checks the home page and lesson 03's",
         tests=("test_lesson_page_in_chromium_loads_offline_with_images_and_typeset_math",
                "test_every_page_passes_axe_cores_wcag_a_and_aa_rules",
                "test_next_and_previous_links_walk_the_lessons_and_the_manual_in_order",
                "test_the_search_box_finds_a_term_of_lesson_03"),
         keep=lambda item: _lesson(item) == LAB_LESSON or _param(item, "page") in SITE_PAGES),
    Rule("tests/lessons/test_device.py",
         "every lesson run again on the simulated GPU (11 kernels, about 3 minutes of the suite without the Colab "
         "stand-in): informative when device handling changes in a lesson or in course_utils; the three crashes "
         "first seen on a real GPU, each a lesson cut after its cell, stay",
         tests=("test_the_solution_runs_on_a_simulated_gpu",)),
    Rule("tests/site/test_colab_env.py",
         "every lesson run under Colab's widget stack on the simulated GPU, each in a kernel of the stand-in (about "
         "1.2 minutes of the suite): informative when the stand-in's pins, the explorers or device handling "
         "change; the stand-in's versions and its imports of every explorer stay",
         tests=("test_solution_notebook_runs_and_explorers_respond_under_ipywidgets_7_on_a_simulated_gpu",)),
    Rule("tests/autograder/test_cluster.py",
         "a Dask scheduler and two workers started, six students graded again on them and a worker killed "
         "mid-run: informative when the cluster path changes; Ctrl-C under a scheduler, checked without one, stays",
         tests=("test_cluster_grades_equal_local_grades", "test_worker_killed_mid_run_loses_no_grade")),
    Rule("tests/autograder/test_clock.py",
         "one core kept five times oversubscribed while a kernel waits out its cell's timeout, graded twice: "
         "informative when the starvation rule (autograder/sandbox/clock.py) changes; its arithmetic and the "
         "clock of a real process tree stay",
         tests=("test_a_timeout_while_the_machine_is_busy_is_graded_again_and_then_left_for_manual_grading",)),
    Rule("tests/autograder/test_sandbox.py",
         "a fork bomb and its hogs beside a victim graded at the same time (the bomb sleeps 12 seconds), and a "
         "notebook run that waits out a hang's timeout: informative when the sandbox's limits or the retry of a "
         "hung run change; the rest of the sandbox stays",
         tests=("test_a_hostile_kernel_leaves_the_victim_beside_it_with_its_grade",
                "test_tests_run_a_hung_notebook_again_and_count_it_but_not_a_slow_cell")),
    Rule("tests/autograder/test_resident.py",
         "each case grades a lesson's memory test cell, calls at L = 4096 included, against a forged answer in a "
         "sandboxed kernel of its own lesson (about 40 s a case on two cores, minutes on a loaded machine): "
         "informative when the memory measurement (sandbox/cgroups.py KernelCgroup, Session._floor), the lessons' "
         "memory tests or the sandbox change; lesson 09's honest answer, measured from outside, and the kernel's "
         "confinement stay",
         tests=("test_an_honest_answer_measured_from_outside_keeps_full_marks_and_no_note",
                "test_memory_forged_inside_the_kernel_fails_its_test_when_the_cgroup_decides",
                "test_without_a_cgroup_numpy_moved_during_a_memory_test_is_flagged_from_the_source",
                "test_without_a_cgroup_an_honest_answer_is_not_flagged"),
         keep=lambda item: _param(item, "lesson") == "09"),
    Rule("tests/test_interrupted_run.py",
         "each case starts JupyterLab, a kernel and Chromium in a run of its own and interrupts it (about half a "
         "minute each): informative when tests/browser.py or tests/processes.py change; the mechanism, on a "
         "`sleep`, stays",
         tests=("test_an_interrupted_run_leaves_no_server_kernel_or_browser_running",)),
]


def _fast_class_suffices(item):
    """Whether a test reads only hostile students the default run grades (hostile.FAST_CLASS): the student it is
    parametrised with and those its `students` mark names (a test of the class without either reads any)."""
    from tests.autograder.hostile import FAST_CLASS
    if "graded" not in item.fixturenames:
        return True
    needed = {_param(item, "student")} - {None}
    for mark in item.iter_markers("students"):
        needed.update(mark.args)
    return needed <= set(FAST_CLASS)


def why_full_only(item):
    """The reason `item` runs only in the full run, or None."""
    return next((rule.why for rule in RULES if rule.applies(item)), None)


def selected(request, fixture, param):
    """The values of parameter `param` among this run's tests that use `fixture` (after -k, -m and the default
    run's choice): what a fixture that builds something per lesson, or per case, needs to build."""
    return {_param(item, param) for item in request.session.items if fixture in item.fixturenames} - {None}


def selected_lessons(request, fixture):
    """selected(request, fixture, "lesson"), in the lessons' order."""
    wanted = selected(request, fixture, "lesson")
    return [lesson for lesson in LESSONS if lesson in wanted]
