"""Test cells run on the grader's side (autograder/kernel/verdicts.py): what the student's kernel can and cannot change.

Each case starts a real Jupyter kernel, runs a student's cells in it, then runs a small lesson's
test cells the way grading does: here, with the answers reached through the kernel's side (autograder/kernel/in_kernel/). A cheat
patches what it likes inside the kernel; it must earn only what its honest answer earns.
"""
import json
import textwrap

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from autograder.kernel import transport as kernel_transport_module
from autograder.kernel import verdicts, wire
from autograder.kernel import session as kernel_session
from autograder.kernel import transport as transports

SETUP = ("import numpy as np\nimport torch\nimport torch.nn.functional as F\nimport course_utils as cu\n"
         "from course_utils.memory import TensorMemory")
TESTS = {
    "test_softmax": '''
_x = np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])
_before = _x.copy()
cu.check_close(softmax(_x), np.exp(_x) / np.exp(_x).sum(-1, keepdims=True), "softmax(x)")
print("softmax: visible tests passed.")
### BEGIN HIDDEN TESTS
_secret = np.array([[7.0, -3.0, 0.25]])
cu.check_close(softmax(_secret), np.exp(_secret) / np.exp(_secret).sum(-1, keepdims=True), "softmax, hidden")
cu.check_true(np.array_equal(_x, _before), "softmax changed its input in place.")
### END HIDDEN TESTS''',
    "test_attention": '''
_g = torch.Generator().manual_seed(0)
_q, _k, _v = (torch.randn(2, 3, 4, generator=_g) for _ in range(3))
_expected = F.scaled_dot_product_attention(_q, _k, _v)
with cu.forbid("torch.nn.functional.scaled_dot_product_attention"):
    _out = attention(_q, _k, _v)
cu.check_close(_out, _expected, "attention(q, k, v)", atol=1e-5)''',
    "test_linear": '''
_m = Scale(3)
_m.load_state_dict({"w": torch.tensor([1.0, -2.0, 0.5])})
_x = torch.tensor([[1.0, 1.0, 2.0]])
_out, (_gx,), _gp = cu.call_with_grads(_m, _x, grad_output=torch.tensor([[1.0, 2.0, 3.0]]))
cu.check_close(_out, torch.tensor([[1.0, -2.0, 1.0]]), "Scale(x)")
cu.check_close(_gx, torch.tensor([[1.0, -4.0, 1.5]]), "the gradient of x")
cu.check_close(_gp["w"], torch.tensor([1.0, 2.0, 6.0]), "the gradient of w")''',
    "test_memory": '''
_x = torch.ones(64, 256)
with TensorMemory() as _mem:
    _total = row_sums(_x)
cu.check_close(_total, torch.full((64,), 256.0), "row_sums(x)")
cu.check_true(_mem.largest_bytes < _x.numel() * 4 // 2, f"row_sums made a tensor of {_mem.largest_bytes} bytes")''',
}
HONEST = '''
def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

def attention(q, k, v):
    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1)
    return w @ v

class Scale(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n))
    def forward(self, x):
        return x * self.w

def row_sums(x):
    return x.sum(-1)
'''
WRONG_SOFTMAX = "def softmax(x):\n    return x / x.sum(-1, keepdims=True)\n"


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


def _started_kernel():
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3")
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


kernel = pytest.fixture(_started_kernel, name="kernel")


def run_in_kernel(kc, code):
    reply = kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
    assert reply["content"]["status"] in ("ok", "error")
    return reply["content"]["status"]


def _session(kernel):
    """A Session over the kernel fixture's client, as grading builds one (a 30 s limit per request)."""
    km, kc = kernel
    transport = transports.kernel_transport(kc, kc.get_shell_msg, deadline=lambda: __import__("time").monotonic() + 30,
                                          on_timeout=km.interrupt_kernel, is_alive=km.is_alive,
                                          get_stdin_msg=kc.get_stdin_msg)
    return kernel_session.Session(transport)


def grade(kernel, student_code):
    """{grade_id: None (passed) or the error} with `student_code` run in a fresh kernel first."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, student_code)
    runner = verdicts.LessonTests(lesson()).runner(_session(kernel))
    return {grade_id: runner.run(grade_id)[1] for grade_id in TESTS}


def passed(results):
    return sorted(k for k, e in results.items() if e is None)


ALL = sorted(TESTS)

# Each cheat: an honest answer to some tests, a wrong one (or none) to the rest, and a patch that
# would turn the wrong one into full marks if the comparisons ran in the kernel.
CHEATS = {
    "a Tensor method reached through type(torch.zeros(0))": (
        "type(torch.zeros(0)).allclose = lambda *a, **k: True\ntype(torch.zeros(0)).__sub__ = lambda a, b: a * 0\n"
        "def attention(q, k, v):\n    return v\n"),
    "a ufunc in the globals of np.isclose's implementation": (
        "import numpy.core.numeric as _n\n_n.__dict__['less_equal'] = lambda *a, **k: np.ones(np.broadcast(*a[:2]).shape, bool)\n"
        + WRONG_SOFTMAX),
    "the __code__ of the function behind np.allclose": (
        "_f = getattr(np.allclose, '__wrapped__', np.allclose)\n"
        "try:\n    _f.__code__ = (lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: True).__code__\nexcept Exception:\n    pass\n"
        + WRONG_SOFTMAX),
    "the numpy module's __class__": (
        "import types\nclass _Liar(types.ModuleType):\n    def __getattribute__(self, name):\n"
        "        if name in ('allclose', 'array_equal'):\n            return lambda *a, **k: True\n"
        "        return types.ModuleType.__getattribute__(self, name)\nnp.__class__ = _Liar\n" + WRONG_SOFTMAX),
    "IPython pre/post-run hooks that undo a patch around the checks": (
        "_ip = get_ipython()\n_real = np.allclose\n_ip.events.register('post_run_cell', lambda *a: setattr(np, 'allclose', lambda *a, **k: True))\n"
        "_ip.events.register('pre_run_cell', lambda *a: setattr(np, 'allclose', _real))\n" + WRONG_SOFTMAX),
    "course_utils.check_close replaced in the kernel": (
        "cu.check_close = lambda *a, **k: None\nimport course_utils.checks as _c\n_c.check_close = cu.check_close\n"
        "_c.check_true = lambda *a, **k: None\n" + WRONG_SOFTMAX),
    "a tensor subclass whose comparisons always agree": (
        "class _Yes(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
        "    def allclose(self, *a, **k):\n        return True\n"
        "def attention(q, k, v):\n    return torch.zeros_like(v).as_subclass(_Yes)\n"),
    "an answer that looks up the hidden test in the kernel's history": (
        "def softmax(x):\n    import json\n    raise ValueError(json.dumps([c for c in In if 'HIDDEN' in c]))\n"),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_patch_in_the_kernel_earns_only_the_honest_answers_points(kernel, name):
    cheat = CHEATS[name]
    results = grade(kernel, HONEST + "\n" + cheat)
    wrong = {"softmax"} if "def softmax" in cheat else {"attention"} if "def attention" in cheat else set()
    expected = sorted(t for t in ALL if t.split("_", 1)[1] not in wrong)
    assert passed(results) == expected, {k: repr(v)[:200] for k, v in results.items()}


FORBID_EVASIONS = {
    "a default argument bound before the test":
        "def attention(q, k, v, _f=F.scaled_dot_product_attention):\n    return _f(q, k, v)\n",
    "torch.ops.aten":
        "def attention(q, k, v):\n    return torch.ops.aten.scaled_dot_product_attention(q, k, v)\n",
    "functools.partial":
        "import functools\n_p = functools.partial(F.scaled_dot_product_attention)\ndef attention(q, k, v):\n    return _p(q, k, v)\n",
    "a lambda's closure":
        "def _make(f):\n    return lambda q, k, v: f(q, k, v)\nattention = _make(F.scaled_dot_product_attention)\n",
    "nn.MultiheadAttention's own path":
        "def attention(q, k, v):\n    return torch._C._nn.scaled_dot_product_attention(q, k, v)\n",
    # torch's modes are per thread and can be switched off: the dispatcher refuses in every thread
    "a thread (modes are per thread)":
        "from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(1)\n"
        "def attention(q, k, v):\n    return _pool.submit(F.scaled_dot_product_attention, q, k, v).result()\n",
    "torch's guards that switch the modes off":
        "def attention(q, k, v):\n    with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():\n"
        "        return F.scaled_dot_product_attention(q, k, v)\n",
    "the mode stacks popped (the grader's own recipe)":
        "from torch.utils._python_dispatch import _disable_current_modes\n"
        "def attention(q, k, v):\n    _popped = []\n"
        "    while torch._C._len_torch_function_stack():\n        _popped.append(torch._C._pop_torch_function_stack())\n"
        "    try:\n        with _disable_current_modes():\n            return F.scaled_dot_product_attention(q, k, v)\n"
        "    finally:\n        for _m in reversed(_popped):\n            torch._C._push_on_torch_function_stack(_m)\n",
    "a torch.library custom op":
        "@torch.library.custom_op('student::attend', mutates_args=())\n"
        "def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n"
        "    return F.scaled_dot_product_attention(q, k, v)\n"
        "def attention(q, k, v):\n    return _attend(q, k, v)\n",
    # ... and no process may start during the call, or be running when it starts
    "a second Python process started by the call":
        "import pickle, subprocess, sys\n"
        "def attention(q, k, v):\n"
        "    code = ('import pickle, sys, torch; q, k, v = pickle.load(sys.stdin.buffer); '\n"
        "            'sys.stdout.buffer.write(pickle.dumps(torch.nn.functional.scaled_dot_product_attention(q, k, v)))')\n"
        "    done = subprocess.run([sys.executable, '-c', code], input=pickle.dumps((q, k, v)), capture_output=True)\n"
        "    return pickle.loads(done.stdout)\n",
    "a process pool started before the test":
        "import multiprocessing\n_pool = multiprocessing.get_context('fork').Pool(1)\n"
        "def attention(q, k, v):\n    return _pool.apply(F.scaled_dot_product_attention, (q, k, v))\n",
    "the math kernel under it, by its aten name":
        "def attention(q, k, v):\n    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n",
}


# the evasions that leave something in the kernel (a thread, a process, a registered operator) get a kernel of their
# own; the others only redefine `attention`, so they share one
LEAVE_SOMETHING = {"a thread (modes are per thread)", "a process pool started before the test", "a torch.library custom op"}


@pytest.mark.parametrize("name", sorted(FORBID_EVASIONS))
def test_a_forbidden_operator_is_caught_whatever_path_reaches_it(request, name):
    kernel = request.getfixturevalue("kernel" if name in LEAVE_SOMETHING else "shared_kernel")
    results = grade(kernel, HONEST + "\n" + FORBID_EVASIONS[name])
    assert isinstance(results["test_attention"], AssertionError), repr(results["test_attention"])
    assert "build yourself" in str(results["test_attention"])
    assert passed(results) == ["test_linear", "test_memory", "test_softmax"]
    ones = "torch.ones(1, 2, 4)"
    assert run_in_kernel(kernel[1], f"F.scaled_dot_product_attention({ones}, {ones}, {ones})") == "ok", (
        "the operator is still refused after the test: the next case in this kernel would be refused by this one")


def test_an_honest_answer_passes_and_the_kernel_never_sees_a_test(kernel):
    km, kc = kernel
    assert passed(grade(kernel, HONEST)) == ALL
    history = []
    kc.execute_interactive("import json; print(json.dumps(list(In)))", timeout=30,
                           output_hook=lambda m: history.append(m["content"].get("text", "")))
    seen = "".join(history)
    assert "_secret" not in seen and "check_close" not in seen and "HIDDEN" not in seen.replace("'HIDDEN' in c", "")


def test_what_the_students_code_raises_or_prints_never_reaches_the_message(kernel):
    student = HONEST + "\ndef softmax(x):\n    print('LEAK-PRINT')\n    raise ValueError('LEAK-RAISE ' + repr(x))\n"
    error = grade(kernel, student)["test_softmax"]
    assert isinstance(error, ValueError)
    assert "LEAK" not in str(error) and "softmax" in str(error)


def test_an_input_changed_in_place_is_seen_by_the_test(kernel):
    student = HONEST + "\ndef softmax(x):\n    x -= x.max(-1, keepdims=True)\n    np.exp(x, out=x)\n    x /= x.sum(-1, keepdims=True)\n    return x\n"
    results = grade(kernel, student)
    assert isinstance(results["test_softmax"], AssertionError)  # the test's own copy of x changed with the kernel's
    assert passed(results) == ["test_attention", "test_linear", "test_memory"]


def test_an_argument_changed_in_place_fails_the_call_and_never_reaches_the_tests_object():
    import numpy as np
    kernel = {}
    exec("def shift(x):\n    x -= 1\n    return None", kernel)
    session = kernel_session.Session(transports.in_process_transport(kernel))
    x = np.array([3.0, 4.0])
    with pytest.raises(AssertionError, match=r"shift\(\.\.\.\) changed its input in place \(argument 1\)"):
        session.fetch("shift")(x)
    assert x.tolist() == [3.0, 4.0]


def test_an_answer_that_zeroes_its_input_cannot_zero_a_reference_computed_after_it(kernel):
    """The hostile case: zero the input in place and return zeros; a test that computes its reference
    from the input after the call would have compared zeros with zeros."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, "def attention(q, k, v):\n    for t in (q, k, v):\n        t.zero_()\n    return torch.zeros_like(q)\n")
    q, k, v = (torch_randn(2, 3, 4, seed) for seed in range(3))
    before = [t.clone() for t in (q, k, v)]
    with pytest.raises(AssertionError, match="changed its input in place"):
        _session(kernel).fetch("attention")(q, k, v)
    assert all(bool((a == b).all()) for a, b in zip((q, k, v), before))


def torch_randn(*shape_and_seed):
    import torch
    *shape, seed = shape_and_seed
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_a_kernel_that_withholds_its_answer_fails_the_test_and_no_fallback_swallows_it(kernel):
    """No answer at all (here the shell's user_expressions emptied by the student's code) was a GraderSideError,
    left pending: a kernel of the course's packages always answers the grader's code, so what stopped it is the
    kernel's state, the student's doing (KernelRefused). A test's own `except Exception` cannot take it for the
    answer's error and go on; the test cell fails with the message (verdicts.TestRunner), and a note says why."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, "def softmax(x):\n    get_ipython().user_expressions = lambda e: {}\n    return x\n")
    session = _session(kernel)
    with pytest.raises(wire.KernelRefused, match="got no answer from your kernel"):
        try:
            softmax = session.fetch("softmax")
            softmax(1.0)  # the answer to this request leaves the kernel sealed, before the request ends
            softmax(1.0)  # this one never runs the grader's code
        except Exception:  # noqa: BLE001: what a test's fallback would do
            pytest.fail("the kernel's refusal was caught as the answer's exception")
    assert any("charged to the submission" in note for note in session.take_notes())


# What reads a request and writes its answer, replaced by the student's code in the kernel: the kernel's side
# uses what C made, found before any of the student's code could name it, so each changes nothing.
CHANNEL_PATCHES = {
    "json.dumps reports every answer as another": (
        "import json\n_real = json.dumps\njson.dumps = lambda o, **k: _real({**o, 'ok': True, 'value': "
        "{'t': 'int', 'v': '1'}}) if type(o) is dict and 'ok' in o else _real(o, **k)\n"),
    "json's encoder class rewritten": (
        "import json, json.encoder\njson.encoder.JSONEncoder.encode = lambda self, o: '{\"ok\": true, \"value\": null}'\n"),
    "pickle.Unpickler drops the forbidden operators from each request": (
        "import pickle\nclass _Drop(pickle.Unpickler):\n    def load(self):\n        r = super().load()\n"
        "        return (r[:4] + ((),) + r[5:]) if type(r) is tuple and len(r) == 8 else r\n"
        "pickle.Unpickler = _Drop\nimport sys\nsys.modules['_pickle'].Unpickler = _Drop\n"),
    "base64 replaced": (
        "import base64\nbase64.b64decode = lambda *a, **k: b''\nbase64.b64encode = lambda *a, **k: b''\n"),
    "contextlib's context managers made empty": (
        "import contextlib\n_nothing = contextlib.nullcontext\n"
        "contextlib.contextmanager = lambda f: (lambda *a, **k: _nothing())\n"
        "contextlib.redirect_stdout = contextlib.redirect_stderr = lambda *a: _nothing()\n"),
}


@pytest.mark.parametrize("name", sorted(CHANNEL_PATCHES))
def test_the_channels_own_tools_replaced_in_the_kernel_change_nothing(kernel, name):
    """Each patch with a wrong softmax and an attention made of the forbidden operator: before, a patched
    encoder turned any answer into a pass and a patched unpickler dropped `cu.forbid`; now both still fail."""
    student = (HONEST + WRONG_SOFTMAX + "def attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
               + CHANNEL_PATCHES[name])
    results = grade(kernel, student)
    assert passed(results) == ["test_linear", "test_memory"], results
    assert "scaled_dot_product_attention" in str(results["test_attention"]), results["test_attention"]


TENSOR_METHOD_PATCHES = (
    "torch.Tensor.cpu = lambda self, *a, **k: torch.zeros_like(torch._C.TensorBase.cpu(self))\n"
    "torch.Tensor.contiguous = lambda self, *a, **k: torch._C.TensorBase.contiguous(self) * 0\n"
    "torch.Tensor.numpy = lambda self, *a, **k: torch._C.TensorBase.numpy(self) * 0\n")


def test_tensor_methods_replaced_in_the_kernel_change_nothing_the_grader_reads(kernel):
    """The kernel's side reads a tensor with TensorBase's own C methods, never torch.Tensor's, which a cell can
    replace: before, answers read through a replaced Tensor.cpu arrived as zeros, and an input changed in place
    could be hidden from the copy taken before the call."""
    results = grade(kernel, HONEST + TENSOR_METHOD_PATCHES)
    assert passed(results) == ALL, results
    hidden_change = "def attention(q, k, v):\n    out = torch.softmax(q @ k.transpose(-2, -1) / 2, -1) @ v\n" \
                    "    q.mul_(2)\n    return out\n"
    results = grade(kernel, HONEST + TENSOR_METHOD_PATCHES + hidden_change)
    assert "in place" in str(results["test_attention"]), results["test_attention"]


def test_python_builtins_replaced_in_the_kernel_are_refused_not_obeyed(kernel):
    """A built-in the kernel's side uses (isinstance) replaced for the whole kernel: the stub never runs on it;
    each request is answered "Tampered", which fails the test (never the grader's failure) and is noted."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, HONEST + "import builtins\n_real = builtins.isinstance\n"
                      "builtins.isinstance = lambda o, t: _real(o, t)\n")
    session = _session(kernel)
    with pytest.raises(AssertionError, match="Python's own functions replaced"):
        session.fetch("softmax")
    assert any("not what C made" in note for note in session.take_notes())


def test_a_request_no_kernel_could_read_is_the_graders_problem_found_before_it_is_sent(kernel, tmp_path, monkeypatch):
    (tmp_path / "grader_only_module.py").write_text("class Fixture:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import grader_only_module
    km, kc = kernel
    run_in_kernel(kc, "def f(x):\n    return 1\n")
    with pytest.raises(verdicts.GraderSideError, match="could not be sent.*grader_only_module"):
        _session(kernel).fetch("f")(grader_only_module.Fixture())


def test_a_kernel_that_says_it_cannot_read_a_readable_request_is_not_the_graders_failure(kernel):
    """io.BytesIO removed, which torch's tensor unpickling uses: the kernel answers that it cannot read the
    request. The grader read it itself with only the course's modules, so this is the kernel's doing: the
    test fails (no grader: flag to forge) and a note says why."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, HONEST + "import io\nio.BytesIO = None\n")
    session = _session(kernel)
    with pytest.raises(AssertionError, match="could not read the grader's request"):
        session.fetch("attention")(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    assert any("could not read the grader's request" in note for note in session.take_notes())


def test_a_broken_backward_pass_fails_its_test(kernel):
    student = HONEST + ("\nclass Scale(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
                        "        self.w = torch.nn.Parameter(torch.ones(n))\n    def forward(self, x):\n"
                        "        return (x * self.w).detach()\n")
    assert passed(grade(kernel, student)) == ["test_attention", "test_memory", "test_softmax"]


def test_memory_made_by_the_students_code_in_the_kernel_is_measured_for_the_test(kernel):
    student = HONEST + "\ndef row_sums(x):\n    return (x.unsqueeze(-1) * torch.ones(x.shape[-1])).sum(-1).sum(-1) / x.shape[-1]\n"
    results = grade(kernel, student)
    assert "row_sums made a tensor of" in str(results["test_memory"]), results["test_memory"]


# full-size work hidden from the memory count, which watches torch calls in the calling thread: each either fails
# the memory test or is noted for review (in_kernel.UNSEEN's word for it)
_FULL_ROW_SUMS = "lambda x: (x.unsqueeze(-1) * torch.ones(x.shape[-1])).sum(-1).sum(-1) / x.shape[-1]"
MEMORY_EVASIONS = {
    "a thread pool": ("from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(1)\n"
                      f"def row_sums(x):\n    return _pool.submit({_FULL_ROW_SUMS}, x).result()\n", "thread"),
    "a thread reached without importing threading": (
        "import sys\n_t = sys.modules['thr' + 'eading']\n"
        f"def row_sums(x):\n    out = []\n    t = getattr(_t, 'Th' + 'read')(target=lambda: out.append(({_FULL_ROW_SUMS})(x)))\n"
        "    t.start()\n    t.join()\n    return out[0]\n", "thread"),
    "a thread started before the test and fed by a queue": (
        "import queue, sys\n_jobs, _done = queue.Queue(), queue.Queue()\n"
        f"_work = {_FULL_ROW_SUMS}\n"
        "def _serve():\n    while True:\n        _done.put(_work(_jobs.get()))\n"
        "sys.modules['thr' + 'eading'].Thread(target=_serve, daemon=True).start()\n"
        "def row_sums(x):\n    _jobs.put(x)\n    return _done.get()\n", "thread"),
    "a process pool started before the test": (
        f"import multiprocessing\n_work = {_FULL_ROW_SUMS}\n"
        "def _full(x):\n    torch.set_num_threads(1)  # (a forked child cannot use the parent's OpenMP threads)\n"
        "    return _work(x)\n"
        "_pool = multiprocessing.get_context('fork').Pool(1)\n"
        "def row_sums(x):\n    return _pool.apply(_full, (x,))\n", "process"),
    "numpy, where no tensor count sees the work": (
        f"def row_sums(x):\n    a = x.numpy()\n    return torch.from_numpy((a[..., None] * np.ones(a.shape[-1])).sum(-1).sum(-1) "
        "/ a.shape[-1]).float()\n", "numpy"),
    "numpy through DLPack (np.from_dlpack)": (
        f"def row_sums(x):\n    a = np.from_dlpack(x)\n    return torch.from_numpy((a[..., None] * np.ones(a.shape[-1])).sum(-1)"
        ".sum(-1) / a.shape[-1]).float()\n", "numpy"),
    "numpy 512 elements at a time": (
        "def row_sums(x):\n    a = np.concatenate([x.reshape(-1)[i:i + 512].numpy() for i in range(0, x.numel(), 512)])"
        ".reshape(x.shape)\n    return torch.from_numpy((a[..., None] * np.ones(a.shape[-1])).sum(-1).sum(-1) / a.shape[-1])"
        ".float()\n", "numpy"),
    "Python lists": (
        "def row_sums(x):\n    rows = x.tolist()\n    return torch.tensor([sum(v for v in r) for r in rows])\n", "numpy"),
    "the watch switched off": (
        "import sys\ndef row_sums(x):\n    sys.setprofile(None)\n    return x.sum(-1)\n", "unwatched"),
    "TorchScript, whose operators no torch function sees": (
        "_cu = torch.jit.CompilationUnit('def full(x):\\n    return (x.unsqueeze(-1) * torch.ones(x.shape[-1])).sum(-1).sum(-1) / x.shape[-1]\\n')\n"
        "def row_sums(x):\n    return _cu.full(x)\n", None),
}


# One kernel for the memory cases that leave nothing running that a later case's measurement would see (idle
# threads at most): each case redefines row_sums. A case that leaves a process gets a kernel of its own.
shared_kernel = pytest.fixture(_started_kernel, name="shared_kernel", scope="module")


def measured(kernel, student_code):
    """(test_memory's error or None, the review notes its measurement made) with `student_code` run in the kernel."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    assert run_in_kernel(kc, HONEST + "\n" + student_code) == "ok"
    session = _session(kernel)
    error = verdicts.LessonTests(lesson()).runner(session).run("test_memory")[1]
    return error, session.take_notes()


@pytest.mark.parametrize("name", sorted(MEMORY_EVASIONS))
def test_memory_hidden_from_the_count_fails_the_test_or_is_flagged(request, name):
    code, where = MEMORY_EVASIONS[name]
    error, notes = measured(request.getfixturevalue("kernel" if where == "process" else "shared_kernel"), code)
    if where is None:
        assert "row_sums made a tensor of" in str(error), error
    else:
        from autograder.kernel.in_kernel import UNSEEN
        assert any(UNSEEN[where] in note and "row_sums" in note for note in notes), (error, notes)


@pytest.mark.skipif(__import__("sys").version_info < (3, 12),
                    reason="the profile hook reaches threads already running from Python 3.12 (setprofile_all_threads)")
def test_numpy_work_in_a_thread_started_before_the_test_is_flagged_on_python_3_12(kernel):
    code = ("import queue, sys\n_jobs, _done = queue.Queue(), queue.Queue()\n"
            "def _serve():\n    while True:\n        a = _jobs.get().numpy()\n"
            "        _done.put((a[..., None] * np.ones(a.shape[-1])).sum(-1).sum(-1) / a.shape[-1])\n"
            "sys.modules['thr' + 'eading'].Thread(target=_serve, daemon=True).start()\n"
            "def row_sums(x):\n    _jobs.put(x)\n    return torch.from_numpy(_done.get()).float()\n")
    from autograder.kernel.in_kernel import UNSEEN
    assert any(UNSEEN["numpy"] in note for note in measured(kernel, code)[1])


def test_an_honest_measured_answer_is_not_flagged(shared_kernel):
    assert measured(shared_kernel, "") == (None, [])


# Memory the kernel made resident, measured from outside it (the kernel's memory cgroup, as grading as root does):
# the full (4096, 4096) float64 pair table is 128 MiB, the test allows half; the honest answer holds a row
RESIDENT_TEST = '''
_a, _b = (torch.randn(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(s)) for s in (1, 2))
pair_sums(_a, _b)  # a first call: what a first call costs once (caches) is not the answer's
with TensorMemory(resident=True) as _mem:
    _got = pair_sums(_a, _b)
cu.check_close(_got, _a * 4096 + _b.sum(), "pair_sums(a, b)")
cu.check_true(_mem.held_bytes < 4096 * 4096 * 8 // 2, f"pair_sums held {_mem.held_bytes} bytes")'''
_FULL_PAIRS = "(a[:, None] + b[None, :]).sum(-1)"
RESIDENT_EVASIONS = {  # each passed its memory test, at most flagged, while the in-kernel count was all there was
    "the memory count's ledger patched to count nothing": (
        "import course_utils.memory as _m\n_m.StorageLedger._count = lambda self, f, a, k: f(*a, **(k or {}))\n"
        f"def pair_sums(a, b):\n    return {_FULL_PAIRS}\n"),
    "numpy, where no tensor count sees the work": (
        "def pair_sums(a, b):\n    a, b = np.from_dlpack(a), np.from_dlpack(b)\n"
        f"    return torch.from_numpy({_FULL_PAIRS})\n"),
    "a thread started before the test": (
        "import queue, sys\n_jobs, _done = queue.Queue(), queue.Queue()\n"
        f"def _serve():\n    while True:\n        a, b = _jobs.get()\n        _done.put({_FULL_PAIRS})\n"
        "sys.modules['thr' + 'eading'].Thread(target=_serve, daemon=True).start()\n"
        "def pair_sums(a, b):\n    _jobs.put((a, b))\n    return _done.get()\n"),
}


@pytest.fixture(name="kernel_in_cgroup")
def _kernel_in_cgroup():
    """A kernel in a memory cgroup of its own, and the KernelCgroup the grader reads it by (root only)."""
    import os

    from autograder.sandbox import Cgroups, KernelCgroup, cgroup_bases
    if os.geteuid() != 0 or not cgroup_bases():
        pytest.skip("a memory cgroup needs root and a writable cgroup hierarchy (grading as root has one)")
    name = f"test-resident-{os.getpid()}"
    groups = Cgroups(name, 4096, 512)
    started = _started_kernel()
    km, kc = next(started)
    try:
        for directory in groups.dirs:
            with open(f"{directory}/cgroup.procs", "w") as f:
                f.write(str(km.provisioner.pid))
        yield km, kc, KernelCgroup.of(name)
    finally:
        next(started, None)
        groups.remove()


def resident(kernel_in_cgroup, student_code):
    """(the resident test's error or None, its review notes) with `student_code` run in the cgroup's kernel."""
    km, kc, memory = kernel_in_cgroup
    assert memory is not None, "the kernel's cgroup has no readable memory peak"
    run_in_kernel(kc, SETUP)
    assert run_in_kernel(kc, student_code) == "ok"
    session = _session((km, kc))
    session.cgroup = memory
    nb = lesson()
    test = new_code_cell(RESIDENT_TEST.strip())
    test.metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "test_resident", "points": 1,
                                 "locked": True, "schema_version": 3}
    nb.cells.append(test)
    error = verdicts.LessonTests(nb).runner(session).run("test_resident")[1]
    return error, session.take_notes()


def test_an_honest_answer_measured_from_outside_its_kernel_passes_unflagged(kernel_in_cgroup):
    assert resident(kernel_in_cgroup, "def pair_sums(a, b):\n    return a * b.numel() + b.sum()\n") == (None, [])


@pytest.mark.parametrize("name", sorted(RESIDENT_EVASIONS))
def test_memory_made_resident_out_of_the_counts_sight_fails_the_test(kernel_in_cgroup, name):
    error, notes = resident(kernel_in_cgroup, RESIDENT_EVASIONS[name])
    assert "pair_sums held" in str(error), (error, notes)


def test_a_process_beside_the_kernel_is_seen_from_outside_however_the_kernel_hides_it(kernel_in_cgroup):
    """A pool started before the test computes the forbidden operator, and the kernel's own check of its processes
    is patched to see none: the grader reads the kernel's cgroup itself and refuses the call."""
    km, kc, cgroup = kernel_in_cgroup
    run_in_kernel(kc, SETUP)
    assert run_in_kernel(kc, HONEST + "\nimport multiprocessing\nimport course_utils.processes as _c\n"
                                      "_pool = multiprocessing.get_context('fork').Pool(1)\n"
                                      "_c.child_processes = lambda: []\n"
                                      "def attention(q, k, v):\n"
                                      "    return _pool.apply(F.scaled_dot_product_attention, (q, k, v))\n") == "ok"
    session = _session((km, kc))
    session.cgroup = cgroup
    error = verdicts.LessonTests(lesson()).runner(session).run("test_attention")[1]
    assert "besides the kernel" in str(error), error
    error = verdicts.LessonTests(lesson()).runner(session).run("test_memory")[1]
    assert error is None and any("besides the kernel" in note for note in session.take_notes())


def test_malformed_answers_are_the_graders_problem_not_data():
    session = kernel_session.Session(lambda payload, answer_callback: json.dumps({"ok": True, "value": {"t": "tensor", "dtype": "object",
                                                                                  "shape": [1], "b64": ""}}))
    with pytest.raises(verdicts.GraderSideError):
        session.fetch("x")
    session = kernel_session.Session(lambda payload, answer_callback: json.dumps({"ok": True, "value": {"t": "ndarray", "dtype": "float64",
                                                                                  "shape": [1000000], "b64": "AAAA"}}))
    with pytest.raises(verdicts.GraderSideError):
        session.fetch("x")
    session = kernel_session.Session(lambda payload, answer_callback: "not json")
    with pytest.raises(verdicts.GraderSideError):
        session.fetch("x")


MALFORMED = {  # every way an answer can fail to be data: one exception type, never the student's error
    "an int past Python's 4300 digits": {"t": "int", "v": "9" * 5000},
    "a missing key": {"t": "tensor", "dtype": "float32"},
    "base64 that is not": {"t": "ndarray", "dtype": "float32", "shape": [1], "b64": "&&&&"},
    "a dict's items not pairs": {"t": "dict", "items": [[1]]},
    "a list past the node budget": {"t": "list", "items": [{"t": "none"}] * (wire.MAX_NODES + 1)},
    "a float that is not": {"t": "float", "v": "one"},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_every_answer_that_is_not_data_is_one_grader_side_error(name):
    session = kernel_session.Session(lambda payload, answer_callback: json.dumps({"ok": True, "value": MALFORMED[name]}))
    with pytest.raises(wire.GraderSideError):
        session.fetch("x")


@pytest.mark.parametrize("value", ["np.longdouble(1) / 3", "np.uint64(2**63 + 5)", "np.uint16(7)", "np.uint32(9)",
                                   "np.array([1, 2], dtype=np.uint64)", "np.clongdouble(1 + 2j)",
                                   "torch.tensor([1, 2], dtype=torch.uint16)", "np.array([1.5, -2.0], dtype='>f8')"])
def test_an_honest_number_of_any_numpy_precision_is_read(kernel, value):
    """A concept check answered with a numpy long double (float128 here) was a grader-side failure scored 0; a
    big-endian array was left pending as one (its dtype is no name the grader reads): it arrives as native numbers."""
    import numpy as np
    km, kc = kernel
    run_in_kernel(kc, SETUP + f"\nanswer = {value}\n")
    got = _session(kernel).fetch("answer")
    expected = eval(value, {"np": np, "torch": torch})
    assert type(got) is type(expected) and (got == expected).all(), (got, expected)


def test_an_error_that_forges_a_grader_failure_is_the_students(kernel):
    """A BaseException named GraderSideError whose `forbidden` property raises as the kernel's side reads it:
    it made the request fail as the grader's (a `grader:` flag). Now the kernel's side reads the error with care
    and reports it as the student's; only the grader decides what is its own failure."""
    km, kc = kernel
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, "class GraderSideError(BaseException):\n    @property\n    def forbidden(self):\n"
                      "        raise GraderSideError()\n    @property\n    def __dict__(self):\n        raise GraderSideError()\n"
                      "def softmax(x):\n    raise GraderSideError()\n")
    with pytest.raises(RuntimeError, match="softmax.* raised Exception"):
        _session(kernel).fetch("softmax")(1.0)


@pytest.mark.parametrize("answer", ["np.datetime64('2020-01-01')", "np.array(['2020-01-01'], dtype='datetime64[D]')",
                                    "np.array(['a', 'b'])", "np.str_('x')"])
def test_an_answer_that_is_not_numbers_is_the_students_failure_not_the_graders(kernel, answer):
    """A date or a string where the test reads numbers: it was sent as numbers the grader could not read, and the
    test cell was left pending as the grader's failure. Now it arrives as the student's object, and the test's own
    check charges it with a message."""
    results = grade(kernel, HONEST + f"def softmax(x):\n    return {answer}\n")
    assert type(results["test_softmax"]) is AssertionError, results["test_softmax"]
    assert passed(results) == ["test_attention", "test_linear", "test_memory"]


def watched_grade(kernel, student_code):
    """(the results, the integrity check's changes, the review notes) of grading `student_code` as grading does: the
    integrity check's baseline taken before any of the student's code, and its check after the tests."""
    from autograder.kernel import integrity
    km, kc = kernel
    watch = integrity.Watch(lesson())

    def ask(mode):
        nonce, expression = watch.request(mode)
        reply = transports.silent_request(kc, kc.get_shell_msg, "", {"check": expression},
                                        deadline=lambda: __import__("time").monotonic() + 120)
        return watch.parse(nonce, reply)

    watch.baseline = ask("baseline")
    run_in_kernel(kc, SETUP)
    run_in_kernel(kc, student_code)
    session = _session(kernel)
    runner = verdicts.LessonTests(lesson()).runner(session)
    results = {grade_id: runner.run(grade_id)[1] for grade_id in TESTS}
    try:
        changes = watch.changes(ask("check"))
    except ValueError as e:  # (what grading flags as "the integrity check got no genuine answer")
        changes = [str(e)]
    return results, changes, session.take_notes()


SDPA_ATTENTION = "def attention(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
_NOTHING = "contextlib.contextmanager(lambda *a, **k: (yield))"
# Round 6's routes around a refusal inside the kernel (issue 56): each gave full marks, unflagged. Now each fails the
# test that forbids the operator.
REFUSAL_UNDOERS = {
    "a text/plain formatter that replays the refused request once its refusal has ended": (
        "import contextlib\nimport course_utils.refusals as _r\n_ip = get_ipython()\n"
        "def _replay(text, p, cycle):\n"
        "    if 'ForbiddenCall' in text and not getattr(_replay, 'busy', False):\n"
        "        expression = _ip.kernel.get_parent('shell')['content']['user_expressions'].get('answer', \"''\")\n"
        "        saved = _r.forbidden_ops, _r.forbidden_in_every_thread\n"
        f"        _r.forbidden_ops = _r.forbidden_in_every_thread = {_NOTHING}\n"
        "        _replay.busy = True\n"
        "        try:\n            text = eval(expression, _ip.user_ns)\n"
        "        finally:\n            _r.forbidden_ops, _r.forbidden_in_every_thread = saved\n"
        "            _replay.busy = False\n"
        "    p.text(repr(text))\n"
        "_ip.display_formatter.formatters['text/plain'].for_type(str, _replay)\n" + SDPA_ATTENTION),
    "the request's own refusal blocks found with gc and exited during the call": (
        "import gc\ndef attention(q, k, v):\n"
        "    for o in gc.get_objects():\n"
        "        if type(o).__name__ == '_GeneratorContextManager' and \\\n"
        "                getattr(getattr(o, 'gen', None), '__name__', '') in ('forbidden_ops', 'forbidden_in_every_thread'):\n"
        "            o.__exit__(None, None, None)\n"
        "    return F.scaled_dot_product_attention(q, k, v)\n"),
    "the refusal table emptied as data, through sys.modules (no static flag names it)": (
        "import sys\n_t = sys.modules['course_utils.refusals']\n"
        "_t.KERNELS.update({'scaled_dot_product_attention': ()})\n_t._computing_kernels.cache_clear()\n"
        "def attention(q, k, v):\n    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]\n"),
    "__builtins__ a dict subclass: the integrity check's exec blinded while the refusals are patched": (
        "import builtins as _b, contextlib\nimport course_utils.refusals as _r\n"
        "_real_exec, _kept = exec, (_r.forbidden_ops, _r.forbidden_in_every_thread)\n"
        "def _blind(code, ns, *rest):\n"
        "    patched = _r.forbidden_ops, _r.forbidden_in_every_thread\n"
        "    _r.forbidden_ops, _r.forbidden_in_every_thread = _kept\n"
        "    try:\n        return _real_exec(code, ns, *rest)\n"
        "    finally:\n        _r.forbidden_ops, _r.forbidden_in_every_thread = patched\n"
        "class _B(dict):\n    def __getitem__(self, name):\n"
        "        return _blind if name == 'exec' else dict.__getitem__(self, name)\n"
        "_builtins = _B(vars(_b))\n"
        "for _n, _v in list(vars(_b).items()):  # (attributes too: a dict subclass was read as a module)\n"
        "    if not _n.startswith('__') or _n in ('__import__', '__build_class__'):\n"
        "        setattr(_builtins, _n, _v)\n"
        f"_r.forbidden_ops = _r.forbidden_in_every_thread = {_NOTHING}\n"
        "get_ipython().user_ns['__builtins__'] = _builtins\n" + SDPA_ATTENTION),
}


@pytest.mark.parametrize("name", sorted(REFUSAL_UNDOERS))
def test_a_refusal_undone_inside_the_kernel_still_fails_the_test(kernel, name):
    """The formatter's answer is never read (the answer leaves the kernel sealed, inside the request's refusal); a
    refusal block found finished, or its kernels gone, as the call returns refuses the call; the refusal table
    comes with the grader's request; a `__builtins__` that is no dict or module refuses every request (its
    built-ins are not what C made) and the integrity check sees it. Each is the student's failure, none pending."""
    results, changes, notes = watched_grade(kernel, HONEST + REFUSAL_UNDOERS[name])
    error = results["test_attention"]
    assert error is not None and not isinstance(error, wire.GraderSideError), results
    if name.startswith("__builtins__"):
        assert passed(results) == [] and any("built-ins were not what C made" in c for c in changes), (results, changes)
    else:
        assert passed(results) == ["test_linear", "test_memory", "test_softmax"], results


def test_an_honest_answer_graded_with_the_integrity_check_keeps_full_marks_and_no_flag(kernel):
    """The control beside the refusals undone: every test passes, the integrity check sees no change, no note."""
    results, changes, notes = watched_grade(kernel, HONEST)
    assert (passed(results), changes, notes) == (ALL, [], [])


# The student's failure that became the grader's (issue 56): each left every test cell pending, flagged `grader:`.
KERNEL_BREAKERS = {
    # (IPython 9 imports pygments' formatter and style the first time it formats an error: a hook that refuses every
    # import would end that in the kernel's own message handler, no reply at all, and the cell's timeout, charged too
    # but a minute per cell; one error formatted first, the hook meets only the grader's request)
    "an audit hook that kills every request": (
        "import sys\nget_ipython().user_expressions({'warm': '1 / 0'})\n"
        "def _hook(event, args):\n    if event == 'marshal.loads':\n        raise RuntimeError('no')\n"
        "sys.addaudithook(_hook)\n", "raised RuntimeError in your kernel"),
    "BaseException swapped for a class no error is": (
        "import builtins\nbuiltins.BaseException = ZeroDivisionError\n"
        "def softmax(x):\n    raise TypeError('a wrong answer that raises')\n", "own functions replaced"),
}


@pytest.mark.parametrize("name", sorted(KERNEL_BREAKERS))
def test_a_kernel_broken_by_the_students_code_is_charged_not_left_pending(kernel, name):
    """Every test cell fails with a message that says what the kernel did; none is a GraderSideError (pending)."""
    code, words = KERNEL_BREAKERS[name]
    results = grade(kernel, HONEST + code)
    assert all(isinstance(e, AssertionError) and words in str(e) for e in results.values()), results


def test_free_names_are_what_a_cell_reads_and_never_binds():
    import ast
    source = "for _i in range(3):\n    y = f(_i) + g\nclass C:\n    pass\nz = [h(w) for w in y]\nprint(len(z))"
    assert verdicts.free_names(ast.parse(source)) == {"f", "g", "h"}


@pytest.mark.parametrize("kind", ["StopIteration", "SystemExit", "GraderSideError", "KeyboardInterrupt"])
def test_an_error_kind_the_kernel_names_outside_the_allow_list_arrives_as_a_runtime_error(kind):
    """StopIteration raised in a test's generator would end the generator quietly; the others are not the
    student's to raise here: every kind outside the allow-list is a RuntimeError naming it."""
    session = kernel_session.Session(lambda payload, answer_callback: json.dumps({"ok": False, "error": kind}))
    with pytest.raises(RuntimeError, match=f"raised {kind}"):
        session.fetch("f")(1)


def test_an_answer_past_the_one_size_limit_fails_its_call_and_says_why():
    kernel = {"huge": lambda: torch.zeros(5 * 2**20), "fine": lambda: torch.zeros(1000)}  # 20 MiB of float32
    session = kernel_session.Session(transports.in_process_transport(kernel))
    assert session.fetch("fine")().shape == (1000,)
    with pytest.raises(AssertionError, match="more data than the grader accepts"):
        session.fetch("huge")()


@pytest.mark.parametrize("bytecode", ["this Python's", "another Python's"])
def test_a_request_runs_as_one_expression_from_bytecode_or_from_source(bytecode, monkeypatch):
    """A request is an expression evaluated in the kernel; a kernel whose Python reads other bytecode compiles the source."""
    import __main__
    monkeypatch.setattr(__main__, "triple", lambda x: 3 * x, raising=False)

    def transport(payload, answer_callback):
        expression = kernel_transport_module.kernel_expression(payload)
        if bytecode == "another Python's":
            magic = repr(kernel_transport_module.importlib.util.MAGIC_NUMBER)
            assert expression.count(magic) == 1
            expression = expression.replace(magic, repr(b"\x00\x00\r\n"))
            expression = expression.replace(kernel_transport_module._STUB_COMPILED, "")  # no bytecode at all: the source is compiled
        return eval(compile(expression, "<request>", "eval"), {})  # noqa: S307: the grader's own request

    assert kernel_session.Session(transport).fetch("triple")(torch.ones(2)).tolist() == [3.0, 3.0]


def test_the_check_command_passes_a_solution_and_fails_a_broken_one(tmp_path, capsys):
    """`python -m autograder check` (it was a second command line, `python -m autograder.kernel.verdicts check`)."""
    from autograder.__main__ import main
    from autograder.course import SOLUTIONS
    source = next(SOLUTIONS.glob("03_*.ipynb"))
    assert main(["check", "03"]) == 0
    nb = nbformat.read(source, as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
    answer.source += "\n\ndef softmax(x, axis=-1):\n    return x\n"
    broken = tmp_path / source.name
    nbformat.write(nb, broken)
    assert main(["check", str(broken)]) == 1
    assert "test_softmax: FAILED" in capsys.readouterr().out
    assert main(["check", "99"]) == 2


def test_a_test_that_rewords_a_dead_kernel_still_reports_a_crash():
    """A test cell that catches the kernel's death and raises its own message (lesson 03's permutation_gap test
    once did) must not make the crash an ordinary failure: the notebook would run on and name the wrong cell."""
    from nbclient.exceptions import DeadKernelError
    from autograder.kernel.verdicts import _dead_kernel
    try:
        try:
            raise DeadKernelError("the kernel died while the student's code ran")
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"permutation_gap raised {type(e).__name__}: {e}") from None
    except AssertionError as reworded:
        assert type(_dead_kernel(reworded)) is DeadKernelError
    assert _dead_kernel(AssertionError("an ordinary failure")) is None
