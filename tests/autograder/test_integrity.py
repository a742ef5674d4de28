"""integrity.py: a replaced or rewritten function the tests rely on is named; a replayed answer is refused."""
import json

import pytest

from autograder.kernel import integrity


def _kernel_answer(watch, mode):
    """Run integrity.py's kernel code in this process, as the kernel would, and parse its answer."""
    nonce, expression = watch.request(mode)
    value = eval(expression)  # noqa: S307: the grader's own code, as the kernel evaluates it
    reply = {"content": {"user_expressions": {"check": {"status": "ok", "data": {"text/plain": repr(value)}}}}}
    return watch.parse(nonce, reply)


def test_the_integrity_check_names_a_replaced_function_and_a_changed_code(monkeypatch):
    import course_utils
    import numpy
    watch = integrity.Watch()
    watch.baseline = _kernel_answer(watch, "baseline")
    assert watch.changes(_kernel_answer(watch, "check")) == []
    monkeypatch.setattr(numpy, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(course_utils.check_true, "__code__", (lambda *a, **k: None).__code__)
    changes = watch.changes(_kernel_answer(watch, "check"))
    assert any(c.startswith("numpy.allclose was replaced (now builtins.function") and "<lambda>" in c for c in changes)
    assert "course_utils.check_true had its code or defaults changed" in changes


def test_a_rewritten_memory_ledger_or_mode_stack_is_named():
    """What the grader still takes from the kernel (forbid's modes, the memory ledger) is watched method by method."""
    import torch
    from course_utils import memory
    watch = integrity.Watch()
    watch.baseline = _kernel_answer(watch, "baseline")
    monkeypatch = pytest.MonkeyPatch()
    try:
        monkeypatch.setattr(memory.StorageLedger, "_count", lambda self, func, args, kwargs: None)
        monkeypatch.setattr(torch._C, "_len_torch_function_stack", lambda: 0)
        changes = watch.changes(_kernel_answer(watch, "check"))
    finally:
        monkeypatch.undo()
    assert any(c.startswith("course_utils.memory.StorageLedger._count was replaced") for c in changes), changes
    assert any(c.startswith("torch._C._len_torch_function_stack was replaced") for c in changes), changes
    assert watch.changes(_kernel_answer(watch, "check")) == []


def test_the_integrity_check_refuses_an_answer_without_its_token():
    watch = integrity.Watch()
    nonce, _ = watch.request("baseline")
    reply = {"content": {"user_expressions": {"check": {"status": "ok", "data": {
        "text/plain": repr(json.dumps({"nonce": "replayed", "paths": [], "objects": {}, "shell": {}}))}}}}}
    with pytest.raises(ValueError, match="token"):
        watch.parse(nonce, reply)
