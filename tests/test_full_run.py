"""tests/full_run.py: every rule names tests that exist, and no test module is left to the full run whole.

A rule that names a test no longer there (renamed, moved) would silently put its group back into the default
run; a rule that takes every test of a module would leave that module out of it. Both are read from the
sources, without a collection.
"""
import ast

import pytest

from tests.full_run import RULES
from tests.nbtools import REPO


def _test_functions(path):
    tree = ast.parse((REPO / path).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


@pytest.mark.parametrize("rule", RULES, ids=[f"{rule.path}:{','.join(rule.tests) or '*'}" for rule in RULES])
def test_every_rule_names_a_test_module_and_tests_it_defines(rule):
    assert (REPO / rule.path).is_file(), f"no test module {rule.path}"
    missing = set(rule.tests) - _test_functions(rule.path)
    assert not missing, f"{rule.path} defines no {sorted(missing)}: rename them in tests/full_run.py"


@pytest.mark.parametrize("rule", RULES, ids=[rule.path for rule in RULES])
def test_no_rule_leaves_a_whole_module_to_the_full_run(rule):
    """Something of every module runs in the default run: a rule keeps some of its tests (`keep`), or leaves some
    of the module's test functions alone."""
    assert rule.keep or set(_test_functions(rule.path)) - set(rule.tests), \
        f"{rule.path}: every test is the full run's; keep one in the default run"


def test_a_module_has_one_rule_at_most():
    paths = [rule.path for rule in RULES]
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)


def test_the_default_runs_lesson_and_hostile_students_exist():
    import inspect

    from tests.autograder import hostile
    from tests.full_run import LAB_LESSON, SITE_PAGES
    from tests.nbtools import LESSONS
    assert LAB_LESSON in LESSONS and f"lessons/{LAB_LESSON}" in SITE_PAGES
    source = inspect.getsource(hostile.build_class)
    assert [s for s in hostile.FAST_CLASS if f'"{s}":' not in source] == []
    assert "perfect" in hostile.FAST_CLASS  # every score of the class is read against the perfect student's


def test_the_workers_are_handed_whole_groups(request):
    """Under pytest-xdist, the tests that share an expensive fixture (the graded class, a module's) go to one worker
    as one group (tests/conftest.py), which xdist marks by a suffix on each test's id. pytest 9.2 ignores xdist
    3.8's suffix (pytest-xdist issue 1386): the run still passes, but the tests are handed out one by one and each
    worker builds every shared fixture again (a fresh venv's full run built the mistakes' verdicts twice, 12 minutes
    each, and the graded class twice, 9)."""
    config = request.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        pytest.skip("not run by pytest-xdist's loadgroup (-n 0)")
    assert request.node.nodeid.endswith("@tests/test_full_run.py"), \
        f"pytest-xdist did not group the tests ({request.node.nodeid!r} has no @group): pip install 'pytest<9.2'"
