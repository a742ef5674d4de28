"""Lesson 11's kernels are counted where the student cannot reach (autograder/kernel/meter.py).

A counted call's Triton launches run in a process the grader starts: the source a kernel may have is checked
there (what Triton's compiler reads, tl.* and constants, nothing private), its work is counted there, and what
the launcher returns must hold only values its kernels stored. The real-kernel tests grade one answer in a
Jupyter kernel, as grading does (a Session over the kernel's channels, with a Meter).
"""
import textwrap
import time

import pytest
import torch

import course_utils as cu
from autograder.kernel import meter as kernel_meter
from autograder.kernel import meter_process
from autograder.kernel import session as kernel_session
from autograder.kernel import transport as transports
from autograder.kernel import wire
from course_utils.kernels import count_work
from tests.mistakes.lesson11 import _solution, _variant

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

SOFTMAX = _solution("softmax_rows")


def _checked(source):
    import math
    namespace = {"tl": tl, "triton": triton, "math": math, "LIMIT": 4}
    return meter_process.check(textwrap.dedent(source), namespace, meter_process.value_attributes(tl))


def _kernel_source(cell):
    """The first @triton.jit function of a solution cell, as the kernel's side sends it (decorators stripped)."""
    start = cell.index("def ", cell.index("@triton.jit"))
    end = cell.find("\n\n\n", start)
    return cell[start:end if end > 0 else None]


@pytest.mark.parametrize("grade_id", ["softmax_rows", "flash_forward", "flash_backward"])
def test_the_lessons_own_kernels_pass_the_check(grade_id):
    _checked(_kernel_source(_solution(grade_id)))


REFUSED = {
    "a module Triton imports": ("def k(x_ptr):\n    tl.core.builtins.open('/tmp/x', 'w')\n", "not part of triton.language"),
    "the interpreter's data": ("def k(x_ptr):\n    data = tl.load(x_ptr).handle\n", ".handle"),
    "a module as a value": ("def k(x_ptr):\n    m = tl\n    m.store(x_ptr, 1.0)\n", "module as a value"),
    "a private attribute": ("def k(x_ptr):\n    tl.load(x_ptr).__class__\n", "__class__"),
    "an import": ("def k(x_ptr):\n    import os\n", "Import"),
    "a function inside": ("def k(x_ptr):\n    def f():\n        pass\n", "function inside"),
    "a lambda": ("def k(x_ptr):\n    f = lambda: 0\n", "Lambda"),
    "a comprehension": ("def k(x_ptr):\n    a = [i for i in range(3)]\n", "ListComp"),
    "triton's runtime": ("def k(x_ptr):\n    triton.runtime.driver\n", "triton.runtime"),
    "a dunder name": ("def k(x_ptr):\n    __builtins__\n", "__builtins__"),
    "with": ("def k(x_ptr):\n    with x_ptr:\n        pass\n", "With"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_kernel_that_reaches_past_triton_is_refused_with_why(name):
    source, why = REFUSED[name]
    with pytest.raises(meter_process.Refused, match=why.replace(".", r"\.").replace("(", r"\(")):
        _checked(source)


def test_what_a_kernel_may_use_passes():
    _checked("""
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=float("-inf"))
        y = tl.math.exp2(x * 1.4426950408889634) + math.pi + LIMIT + triton.cdiv(n, BLOCK)
        for i in range(0, min(n, 4)):
            y = tl.where(y > i, y, 0.0).to(x_ptr.dtype.element_ty)
        tl.store(x_ptr + offsets, tl.maximum(y, x, propagate_nan=tl.PropagateNan.ALL), mask=offsets < n)
    """)


# ------------------------------------------------------------------ the meter process


@pytest.fixture(scope="module")
def meter():
    m = kernel_meter.Meter()
    yield m
    m.close()


def _question(kernel_source, x, y, block):
    """The launch of softmax_kernel over x (R, C) into y, as the kernel's side sends it."""
    import base64
    storages = [base64.b64encode(t.numpy().tobytes()).decode() for t in (x, y)]
    tensor = lambda i, t: {"t": "tensor", "s": i, "dtype": str(t.dtype)[6:], "off": 0, "size": list(t.shape),  # noqa: E731
                           "stride": list(t.stride())}
    return {"op": "launch", "kernel": "softmax_kernel", "sources": {"softmax_kernel": kernel_source},
            "globals": {"tl": {"t": "module", "v": "triton.language"}}, "grid": [x.shape[0]],
            "args": [tensor(0, x), tensor(1, y), x.shape[1], x.stride(0)], "kwargs": {"BLOCK": block},
            "storages": storages}


def test_the_meter_counts_a_launch_as_the_notebooks_counter_does_and_returns_what_it_wrote(meter):
    x = torch.randn(3, 20, generator=torch.Generator().manual_seed(0))
    reply = meter.launch(_question(_kernel_source(SOFTMAX), x, torch.zeros(3, 20), 32))
    assert reply["work"]["launches"] == 1 and reply["work"]["bytes_loaded"] == reply["work"]["bytes_stored"] == 240
    written = torch.frombuffer(bytearray(reply["storages"][1]), dtype=torch.float32).view(3, 20)
    assert torch.allclose(written, torch.softmax(x, -1), atol=1e-6)
    assert 0 not in reply["storages"]  # x was only read
    assert torch.isin(written.double().flatten(), torch.from_numpy(reply["stored"])).all()  # every value it stored


def test_the_meter_refuses_a_kernel_that_reaches_past_triton_and_runs_nothing(meter, tmp_path):
    target = tmp_path / "escaped"
    source = _kernel_source(SOFTMAX).replace("    row = tl.program_id(0)\n",
                                             f"    row = tl.program_id(0)\n    tl.core.builtins.open({str(target)!r}, 'w')\n")
    reply = meter.launch(_question(source, torch.randn(2, 8), torch.zeros(2, 8), 8))
    assert "not part of triton.language" in reply["refused"]
    assert not target.exists()


def test_a_global_that_is_not_triton_or_a_constant_is_refused(meter):
    question = _question(_kernel_source(SOFTMAX), torch.randn(2, 8), torch.zeros(2, 8), 8)
    question["globals"]["helper"] = {"t": "other", "kind": "function"}
    assert "helper" in meter.launch(question)["refused"]


# ------------------------------------------------------------------ in a real kernel, as grading runs it

SETUP = textwrap.dedent('''
    import os
    os.environ["NBGRADER_EXECUTION"] = "1"
    import math
    import torch
    import course_utils as cu
    from course_utils.kernels import count_work, load_triton
    triton, tl, interpreted = load_triton()
''')
CHEATS = {
    # the interpreter's counting put back to Triton's own around a second read (the counter was in this process)
    "Triton's own load put back": SOFTMAX.replace("def softmax_rows(x):", '''def softmax_rows(x):
    import course_utils.kernels as K
    for (owner, name), original in list(K._PATCHED.items()):
        setattr(owner, name, original)
    return _rows(x)


def _rows(x):''').replace("    x = x - tl.max(x, axis=0)\n", "    top = tl.max(x, axis=0)\n    x = tl.load(x_ptr + row * row_stride "
                          "+ cols, mask=inside, other=float('-inf')) - top\n"),
    # numpy computes; a kernel that copies x into y is launched for the count
    "numpy computes, a copy is launched": _variant("softmax_rows", ("    return y", "    a = x.numpy()\n    e = __import__("
                                                                    "'numpy').exp(a - a.max(-1, keepdims=True))\n    "
                                                                    "return torch.from_numpy(e / e.sum(-1, keepdims=True))")),
    # the real kernel run through the interpreter's executor directly, never launched
    "the interpreter run directly": SOFTMAX + textwrap.dedent('''


        def softmax_rows(x):
            from triton.runtime.interpreter import GridExecutor
            R, C = x.shape
            out = torch.empty(R, C, dtype=x.dtype)
            GridExecutor(softmax_kernel.rewrite(), softmax_kernel.arg_names, (R,))(x, out, C, x.stride(0),
                                                                                     BLOCK=triton.next_power_of_2(C))
            return out
    '''),
    # numpy computes; a kernel that loads and stores exactly what the exercise's does carries the result in
    "numpy computes, a copy kernel carries it in": SOFTMAX + '\n\n@triton.jit\ndef copy_rows(p_ptr, x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):\n    """Loads and stores exactly what softmax_kernel does, and no exponential; stores the rows of p."""\n    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    inside = cols < n_cols\n    pass\n    tl.store(y_ptr + row * n_cols + cols, tl.load(p_ptr + row * n_cols + cols, mask=inside), mask=inside)\n\n\ndef softmax_rows(x):\n    R, C = x.shape\n    import numpy\n    a = x.numpy()\n    e = numpy.exp(a - a.max(-1, keepdims=True))\n    p = torch.from_numpy(e / e.sum(-1, keepdims=True))\n    y = torch.empty(R, C, dtype=x.dtype)\n    copy_rows[(R,)](p, x, y, C, x.stride(0), BLOCK=triton.next_power_of_2(C))\n    return y\n',
    # ... and takes the exponentials of x too, as a decoy for the work by kind
    "numpy computes, a copy kernel with decoy exponentials": SOFTMAX + '\n\n@triton.jit\ndef copy_rows(p_ptr, x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):\n    """Loads and stores exactly what softmax_kernel does, and every exponential; stores the rows of p."""\n    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    inside = cols < n_cols\n    e = tl.exp(tl.load(x_ptr + row * row_stride + cols, mask=inside, other=float(\'-inf\')))\n    tl.max(e, axis=0)\n    tl.store(y_ptr + row * n_cols + cols, tl.load(p_ptr + row * n_cols + cols, mask=inside), mask=inside)\n\n\ndef softmax_rows(x):\n    R, C = x.shape\n    import numpy\n    a = x.numpy()\n    e = numpy.exp(a - a.max(-1, keepdims=True))\n    p = torch.from_numpy(e / e.sum(-1, keepdims=True))\n    y = torch.empty(R, C, dtype=x.dtype)\n    copy_rows[(R,)](p, x, y, C, x.stride(0), BLOCK=triton.next_power_of_2(C))\n    return y\n',
    # the real kernel run below its launch (a two-pass run the meter never sees), then carried in by a copy kernel
    "the interpreter run directly, then copied in": SOFTMAX + "\nfrom triton.runtime.interpreter import GridExecutor\n"
    "_run_grid = GridExecutor.__call__  # kept before the call: what the grader's refusal cannot take back\n" + '\n\n@triton.jit\ndef copy_rows(p_ptr, x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):\n    """Loads and stores exactly what softmax_kernel does, and every exponential; stores the rows of p."""\n    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    inside = cols < n_cols\n    e = tl.exp(tl.load(x_ptr + row * row_stride + cols, mask=inside, other=float(\'-inf\')))\n    tl.max(e, axis=0)\n    tl.store(y_ptr + row * n_cols + cols, tl.load(p_ptr + row * n_cols + cols, mask=inside), mask=inside)\n\n\ndef softmax_rows(x):\n    R, C = x.shape\n    p = torch.empty(R, C, dtype=x.dtype)\n    _run_grid(GridExecutor(softmax_kernel.rewrite(), softmax_kernel.arg_names, (R,)), x, p, C, x.stride(0), BLOCK=triton.next_power_of_2(C))\n    y = torch.empty(R, C, dtype=x.dtype)\n    copy_rows[(R,)](p, x, y, C, x.stride(0), BLOCK=triton.next_power_of_2(C))\n    return y\n',
    # the launcher sets the counts of every open count_work block (the grader's, in the old design)
    "counts set by the launcher": _variant("softmax_rows", ("    x = x - tl.max(x, axis=0)\n",
                                                            "    top = tl.max(x, axis=0)\n    x = tl.load(x_ptr + row * "
                                                            "row_stride + cols, mask=inside, other=float('-inf')) - top\n"),
                                           ("    return y", "    for w in __import__('course_utils.kernels').kernels."
                                            "counting():\n        object.__setattr__(w, 'bytes_loaded', R * C * 4)\n"
                                            "    return y")),
}


@pytest.fixture(scope="module")
def triton_kernel():
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3")
    kc.execute_interactive(SETUP, timeout=120)
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def graded(kernel, meter, code):
    """softmax_rows of `code` as the lesson's hidden test calls it: None (passed) or the error (a failed check, or
    the student's crash, which the grader charges)."""
    km, kc = kernel
    assert kc.execute_interactive(code, timeout=60)["content"]["status"] == "ok"
    transport = transports.kernel_transport(kc, kc.get_shell_msg, deadline=lambda: time.monotonic() + 60,
                                          on_timeout=km.interrupt_kernel, is_alive=km.is_alive,
                                          get_stdin_msg=kc.get_stdin_msg)
    session = kernel_session.Session(transport, meter=meter)
    x = torch.randn(4, 50, generator=torch.Generator().manual_seed(1))
    try:
        with cu.forbid("torch.softmax"), cu.launcher_only(), count_work() as work:
            got = session.fetch("softmax_rows")(x)
        cu.check_close(got, torch.softmax(x, -1), "softmax_rows", atol=1e-6)
        cu.check_true(work.foreign_values == 0, f"loaded values x does not hold: {work.foreign_values}")
        cu.check_true(work.bytes_loaded == work.bytes_stored == x.numel() * 4, f"moved {work}")
        cu.check_true(work.exponentials >= x.numel(), f"took {work.exponentials} exponentials")
    except (AssertionError, RuntimeError) as e:
        return e
    return None


def test_an_honest_kernel_is_counted_in_the_graders_process_and_passes(triton_kernel, meter):
    assert graded(triton_kernel, meter, SOFTMAX) is None


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_kernels_work_cannot_be_hidden_forged_or_done_elsewhere(triton_kernel, meter, name):
    error = graded(triton_kernel, meter, CHEATS[name])
    assert error is not None, f"{name}: passed"
    if "copy kernel" in name or "copied in" in name:  # what catches it, decoy exponentials or not: what it loaded
        assert "loaded values x does not hold" in str(error), str(error)
    if name == "the interpreter run directly":  # refused in the kernel, and the grader's sentence says why
        assert "below a launch" in str(error), str(error)


def test_a_kernel_that_never_ends_times_out_at_the_cells_limit_as_the_students(triton_kernel, meter):
    km, kc = triton_kernel
    endless = _variant("softmax_rows", ("    row = tl.program_id(0)\n", "    row = tl.program_id(0)\n    while row >= 0:\n"
                                                                    "        row = row + 0\n"))
    assert kc.execute_interactive(endless, timeout=60)["content"]["status"] == "ok"
    x = torch.randn(2, 8)
    starved = []
    # on a machine too busy to run the meter (its process waited for a core more than it ran) the timeout is not the
    # student's: the grader says so (GraderSideError) and charges nothing. That is the busy machine's answer, not
    # this test's; the launch is tried again, three times at most, until the meter had the CPU to time it out
    while len(starved) < 3:
        end = time.monotonic() + 8
        transport = transports.kernel_transport(kc, kc.get_shell_msg, deadline=lambda: end,
                                              on_timeout=km.interrupt_kernel, is_alive=km.is_alive,
                                              get_stdin_msg=kc.get_stdin_msg)
        session = kernel_session.Session(transport, meter=meter, deadline=lambda: end)
        with pytest.raises((TimeoutError, wire.GraderSideError)) as stopped:
            with cu.launcher_only(), count_work():
                session.fetch("softmax_rows")(x)
        assert meter.process is None  # the endless launch's process was ended; the next launch starts a fresh one
        if stopped.type is TimeoutError:
            assert "did not finish within the cell's time limit" in str(stopped.value), stopped.value
            break
        assert "starved of CPU on a busy machine" in str(stopped.value), stopped.value
        starved.append(str(stopped.value))
    else:
        pytest.skip(f"the machine was too busy to time the meter out, three times: {starved}")
    assert graded(triton_kernel, meter, SOFTMAX) is None
