"""What a test defines is lent to the student's code, never sent (autograder/kernel/lending.py).

A fake model, a reference function or a lambda made by a test stays in the grader's process: the
student's code gets a stand-in whose calls and public attributes are questions to the grader.
Each case runs a small lesson's tests against a real kernel, as grading does.
"""
import pickle
import textwrap

import pytest

import nbformat
import torch
from nbformat.v4 import new_code_cell, new_notebook

from autograder.kernel import session as remote  # the Session (its lending half: lending.py)
from autograder.kernel import verdicts
from autograder.kernel import session as kernel_session
from autograder.kernel import transport as transports
from tests.autograder.test_verdicts import SETUP, _session, kernel, run_in_kernel  # noqa: F401 (a fixture)

TESTS = {
    "test_attend": '''
class _ReferenceScore(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([2.0, -1.0, 0.5]))
    def forward(self, q, k):
        return torch.tanh(q * self.w) @ k.T
_score = _ReferenceScore()
_q, _k = torch.ones(2, 3), torch.arange(12.0).view(4, 3) / 10
cu.check_close(attend(_q, _k, _score), torch.softmax(_score(_q, _k), -1), "attend(q, k, score)")
cu.check_close(first_parameter(_score), _score.w, "first_parameter(model)")
cu.check_true(same(_score) is _score, "same(model) returns the model it was given")''',
    "test_apply": '''
### BEGIN HIDDEN TESTS
_SECRET = "hidden-constant-71853"
_spike = lambda t: t * 7.25 + len(_SECRET) * 0
cu.check_close(apply(_spike, torch.ones(3)), torch.full((3,), 7.25), "apply(fn, x)")
### END HIDDEN TESTS''',
    "test_my_score": '''
_w = torch.tensor([2.0, -1.0, 0.5])
_q, _k = torch.ones(2, 3), torch.arange(12.0).view(4, 3) / 10
cu.check_close(my_score(_q, _k), torch.tanh(_q * _w) @ _k.T, "my_score(q, k)")''',
}
HONEST = '''
def attend(q, k, score):
    return torch.softmax(score(q, k), -1)

def first_parameter(model):
    return next(model.eval().parameters())   # eval() returns the test's own model, lent again

def apply(fn, x):
    return fn(x)

def same(model):
    return model

def my_score(q, k):
    return torch.tanh(q * torch.tensor([2.0, -1.0, 0.5])) @ k.T
'''


def lesson():
    nb = new_notebook()
    setup = new_code_cell(SETUP)
    setup.metadata["tags"] = ["grader-setup"]
    answer = new_code_cell("### BEGIN SOLUTION\n" + HONEST + "### END SOLUTION")
    answer.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answers", "schema_version": 3}
    nb.cells = [setup, answer]
    for grade_id, source in TESTS.items():
        cell = new_code_cell(textwrap.dedent(source).strip())
        cell.metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": grade_id, "points": 1,
                                     "locked": True, "schema_version": 3}
        nb.cells.append(cell)
    return nbformat.from_dict(nb)


def grade(kernel, student_code):
    """({grade_id: None or the error}, the session) with `student_code` run after the honest answers."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, HONEST)
    run_in_kernel(kc, student_code)
    session = _session(kernel)
    runner = verdicts.LessonTests(lesson()).runner(session)
    return {grade_id: runner.run(grade_id)[1] for grade_id in TESTS}


def kernel_value(kernel, expression):
    km, kc = kernel
    reply = kc.execute_interactive("", user_expressions={"x": expression}, timeout=30, output_hook=lambda m: None)
    return reply["content"]["user_expressions"]["x"]["data"]["text/plain"]


def test_an_honest_answer_calls_the_tests_objects_and_passes(kernel):
    results = grade(kernel, "")
    assert all(error is None for error in results.values()), results


def test_a_lent_object_kept_by_the_students_code_answers_nothing_later(kernel):
    keeper = '''
_kept = []
def attend(q, k, score):
    _kept.append(score)
    return torch.softmax(score(q, k), -1)

def my_score(q, k):
    return _kept[-1](q, k)   # the test's reference, kept from an earlier call
'''
    results = grade(kernel, keeper)
    assert results["test_attend"] is None
    assert isinstance(results["test_my_score"], RuntimeError)


def test_the_students_code_cannot_read_a_lent_objects_code_or_globals(kernel):
    snoop = '''
import inspect, pickle
leak = []
def apply(fn, x):
    for probe in (lambda: fn.__code__.co_consts, lambda: fn.__globals__, lambda: fn.__closure__,
                  lambda: inspect.getsource(fn), lambda: pickle.dumps(fn), lambda: vars(fn), lambda: fn.__dict__,
                  lambda: fn.__reduce_ex__(2), lambda: fn.__wrapped__,
                  lambda: input('{"op": "getattr", "id": %d, "args": {"t": "list", "items": ["__globals__"]}, '
                                '"kwargs": {"t": "dict", "items": []}}' % object.__getattribute__(fn, "_number"))):
        try:
            leak.append(repr(probe()))
        except BaseException as e:
            leak.append(type(e).__name__)
    return fn(x)
'''
    results = grade(kernel, snoop)
    assert results["test_apply"] is None  # the call itself still works
    leaked = kernel_value(kernel, "repr(leak)")
    assert "hidden-constant" not in leaked and "7.25" not in leaked and "_SECRET" not in leaked
    assert "AttributeError" in leaked


def test_a_request_carries_no_code_only_a_number_for_each_test_object():
    secret = "hidden-constant-" + "71853"
    namespace = {"__name__": verdicts.TEST_MODULE}
    exec("def reference(x):\n    return x + len(%r)\nclass Fake:\n    pass\n" % secret, namespace)
    session = remote.Session(lambda payload, callback: None)
    payload = session.lending.pickle((namespace["reference"], namespace["Fake"](), lambda t: t * 7.25, torch.ones(2)))
    assert secret.encode() not in payload and b"7.25" not in payload and b"reference" in payload  # (its name only)
    ids = []

    class Reader(pickle.Unpickler):
        def persistent_load(self, pid):
            ids.append(pid[0])
            return pid

    loaded = Reader(__import__("io").BytesIO(payload)).load()
    assert ids == ["g", "g", "g"] and torch.equal(loaded[3], torch.ones(2))


def test_a_lent_object_asked_for_gigabytes_fails_the_students_call_and_the_grader_lives_on():
    """The kernel chooses a lent object's arguments: a fixture that allocates what it is asked for (a cache
    of 3 GiB here) must not take the grader's memory with it."""
    namespace = {"__name__": verdicts.TEST_MODULE, "torch": torch}
    exec("def make_cache(n):\n    return int(torch.ones(n, dtype=torch.uint8)[::4096].sum())\n", namespace)
    kernel = {"__name__": "__main__"}
    exec("def use(make):\n    return make(3 * 2**30)\ndef small(make):\n    return make(1000)\n", kernel)
    session = kernel_session.Session(transports.in_process_transport(kernel))
    with pytest.raises(RuntimeError, match="raised RuntimeError"):
        session.fetch("use")(namespace["make_cache"])
    assert session.fetch("small")(namespace["make_cache"]) == 1
    big = torch.ones(2**29, dtype=torch.uint8)  # and the grader's own work is not limited afterwards
    assert big.sum().item() == 2**29


def test_a_tests_part_stands_in_for_the_students_own_and_gradients_flow_through_it(kernel):
    import course_utils as cu
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, "def attend(q):\n    return q * 0   # an earlier exercise, wrong\n\n"
                      "def model(q):\n    return attend(q) + 1   # a later one, right\n")
    namespace = {"__name__": verdicts.TEST_MODULE}
    exec("def reference_attend(q):\n    return q * 2\n", namespace)
    model = _session(kernel).fetch("model")
    x, g = torch.arange(3.0), torch.tensor([1.0, -1.0, 0.5])
    assert model(x).tolist() == [1.0, 1.0, 1.0]
    with cu.standing_in(attend=namespace["reference_attend"]):
        assert model(x).tolist() == [1.0, 3.0, 5.0]
        _, (grad,), _ = cu.call_with_grads(model, x, grad_output=g)
    assert torch.equal(grad, 2 * g)  # through the grader's reference, into the student's graph and back
    assert model(x).tolist() == [1.0, 1.0, 1.0]  # the student's own part again after the block
    assert "reference" not in kernel_value(kernel, "repr(attend)")


def _two_cell_lesson(first, second):
    nb = new_notebook()
    setup = new_code_cell(SETUP)
    setup.metadata["tags"] = ["grader-setup"]
    nb.cells = [setup]
    for grade_id, source in (("test_first", first), ("test_second", second)):
        cell = new_code_cell(textwrap.dedent(source).strip())
        cell.metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": grade_id, "points": 1,
                                     "locked": True, "schema_version": 3}
        nb.cells.append(cell)
    return nbformat.from_dict(nb)


def test_a_part_stood_in_for_a_cell_serves_its_visible_part_and_no_later_cell(kernel):
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, "def split(x):\n    raise NotImplementedError   # an earlier exercise, not done\n\n"
                      "def model(x):\n    return split(x) * 10   # a later one, done\n")
    first = '''
### BEGIN HIDDEN TESTS
def _split(x):
    return x + 1
cu.stand_in(split=_split)
### END HIDDEN TESTS
cu.check_close(model(torch.ones(2)), torch.full((2,), 20.0), "model(x)")'''
    second = '''
cu.check_close(model(torch.ones(2)), torch.full((2,), 20.0), "model(x)")'''
    runner = verdicts.LessonTests(_two_cell_lesson(first, second)).runner(_session(kernel))
    assert runner.run("test_first")[1] is None
    assert isinstance(runner.run("test_second")[1], NotImplementedError)  # the student's own part again


def test_a_part_stood_in_for_a_cell_in_a_notebook_ends_with_the_cell(kernel):
    km, kc = kernel
    run_in_kernel(kc, SETUP + "\ndef split(x):\n    return 'mine'\n")
    run_in_kernel(kc, "cu.stand_in(split=lambda x: 'stood in')\nseen = split(0)")
    assert kernel_value(kernel, "seen") == "'stood in'"
    assert kernel_value(kernel, "split(0)") == "'mine'"


def test_a_tests_object_may_use_the_students_objects_while_the_kernel_waits(kernel):
    import course_utils as cu
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, '''
class Score(torch.nn.Module):
    def forward(self, q, k):
        return q @ k.T

def attend(q, k, score):
    raise NotImplementedError   # an earlier exercise, not done

class Reader:
    def __init__(self):
        self.score = Score()
    def read(self, q, k):
        return attend(q, k, self.score).sum()   # a later one, done
''')
    namespace = {"__name__": verdicts.TEST_MODULE}
    exec("def reference_attend(q, k, score):\n    return torch.softmax(score(q, k), -1)\n", {**namespace, "torch": torch},
         namespace)
    session = _session(kernel)
    reader = session.fetch("Reader")()
    q, k = torch.ones(2, 3), torch.arange(12.0).view(4, 3)
    with cu.standing_in(attend=namespace["reference_attend"]):
        assert abs(float(reader.read(q, k)) - 2.0) < 1e-5  # the test's attend called the student's Score
    with pytest.raises(NotImplementedError):
        reader.read(q, k)
