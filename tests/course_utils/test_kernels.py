"""course_utils.kernels: Triton's interpreter without a GPU, and the work a kernel does, counted exactly."""
import os
import sys
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton has no package for this platform (lesson 11 uses Colab there)")

from course_utils import kernels  # noqa: E402
from course_utils.kernels import KernelWork, count_eager_bytes, count_work, key_tiles, load_triton  # noqa: E402

triton, tl, interpreted = load_triton()
REPO = Path(__file__).resolve().parents[2]


def add_source(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=inside) + tl.load(y_ptr + offsets, mask=inside),
             mask=inside)


def matmul_source(a_ptr, b_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    rows, inner, cols = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * K + inner[None, :])
    b = tl.load(b_ptr + inner[:, None] * N + cols[None, :])
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], tl.dot(a, b))


add_kernel = triton.jit(add_source)
matmul_kernel = triton.jit(matmul_source)


def test_without_a_gpu_kernels_run_in_the_interpreter():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU compiles the kernels")
    assert interpreted and kernels.is_interpreted()
    assert type(add_kernel).__name__ == "InterpretedFunction"


def test_loads_and_stores_count_only_what_the_masks_let_through():
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty(1000)
    with count_work() as work:
        add_kernel[(4,)](x, y, out, 1000, BLOCK=256)
    assert torch.equal(out, x + y)
    assert (work.launches, work.programs, work.loads, work.stores) == (1, 4, 8, 4)
    assert (work.bytes_loaded, work.bytes_stored, work.dot_flops) == (8000, 4000, 0)
    assert work.bytes_moved == 12000 and "4 programs" in str(work)


def test_a_tile_product_counts_two_flops_per_multiply_add():
    a, b = torch.randn(16, 8), torch.randn(8, 32)
    c = torch.empty(16, 32)
    with count_work() as work:
        matmul_kernel[(1,)](a, b, c, M=16, K=8, N=32)
    torch.testing.assert_close(c, a @ b)
    assert work.dot_flops == 2 * 16 * 8 * 32
    assert work.bytes_loaded == (16 * 8 + 8 * 32) * 4 and work.bytes_stored == 16 * 32 * 4


def test_every_open_block_counts_what_runs_inside_it_and_blocks_are_told_apart_by_identity():
    """A student's own block inside the grader's hides nothing from it; two nested blocks with equal counts
    (equal as dataclasses) each end as themselves (they were removed by value, confusing the two)."""
    x, y, out = torch.randn(100), torch.randn(100), torch.empty(100)
    with count_work() as outer:
        with count_work() as inner:
            add_kernel[(1,)](x, y, out, 100, BLOCK=128)
        with count_work() as first, count_work() as second:
            assert first == second and first is not second
        assert kernels.counting() == [outer]
    assert inner.bytes_loaded == 800 and outer.bytes_loaded == 800 and outer.launches == 1
    assert kernels.counting() == []


@triton.jit
def atomic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.atomic_add(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)
    tl.atomic_add(x_ptr + offsets, 0.0, mask=mask)  # a second read of x, through an atomic


def test_atomics_are_counted_as_a_read_and_a_write():
    x, out = torch.randn(100), torch.zeros(100)
    with count_work() as work:
        atomic_kernel[(1,)](x, out, 100, BLOCK=128)
    assert work.loads == 3 and work.bytes_loaded == 3 * 400 and work.bytes_stored == 2 * 400


def test_outside_a_block_nothing_is_patched():
    from triton.runtime import interpreter
    before = interpreter.InterpreterBuilder.create_masked_load
    with count_work():
        assert interpreter.InterpreterBuilder.create_masked_load is not before
    assert interpreter.InterpreterBuilder.create_masked_load is before


def test_a_compiled_kernel_is_counted_in_the_interpreter():
    """On a GPU, count_work runs the compiled kernels launched inside it in the interpreter (host copies in,
    results copied back): here a JITFunction made directly stands for one."""
    from triton.runtime.jit import JITFunction
    compiled = JITFunction(add_source)
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    with count_work() as work:
        compiled[(2,)](x, y, out, 300, BLOCK=256)
    assert torch.equal(out, x + y) and work.bytes_loaded == 2400 and work.programs == 2


TRITON_FIRST = """
import os, torch
os.environ.pop("TRITON_INTERPRET", None)
import triton, triton.language as tl            # as torch._dynamo does, or a GPU machine: compiled mode
from triton.runtime.jit import JITFunction
from course_utils.kernels import count_work, load_triton

def softmax_source(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + cols, e / tl.sum(e, axis=0), mask=cols < n)

x, out = torch.randn(20), torch.empty(20)
with count_work():                              # a compiled kernel, interpreted while counted (a GPU's case)
    JITFunction(softmax_source)[(1,)](x, out, 20, BLOCK=32)
assert torch.allclose(out, torch.softmax(x, 0)), "compiled"
{after}
"""


@pytest.mark.parametrize("after", [
    # load_triton after Triton: kernels defined now are interpreted (no GPU here), Triton's own tl.max is not
    'load_triton(); os.environ["TRITON_INTERPRET"] = "1"; out.zero_()\n'
    'triton.jit(softmax_source)[(1,)](x, out, 20, BLOCK=32)\n'
    'assert torch.allclose(out, torch.softmax(x, 0)), "interpreted"',
    # outside a kernel, a device function still says what Triton says
    'try:\n    tl.max(x, axis=0)\nexcept RuntimeError as e:\n    assert "outside of the scope" in str(e)\n'
    'else:\n    raise AssertionError("no error")'])
def test_kernels_call_tritons_own_device_functions_when_triton_came_first(after, tmp_path):
    """Triton decides compiled or interpreted when a function is decorated, so tl.max and tl.sum are compiled-mode
    when Triton was imported before the interpreter was on. An interpreted kernel can still call them."""
    import subprocess
    script = tmp_path / "triton_first.py"          # Triton reads a kernel's source from its file
    script.write_text(TRITON_FIRST.format(after=after))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_grader_adds_counts_made_in_the_kernel():
    work = KernelWork()
    work.absorb({"loads": 3, "bytes_loaded": 120, "unknown": 7})
    work.absorb({"bytes_loaded": 80})
    assert (work.loads, work.bytes_loaded, work.stores) == (3, 200, 0)


def test_the_work_of_a_call_crosses_the_kernel_boundary():
    """A test's count_work block asks the kernel to count the call; the answer's figures land in the block."""
    from autograder.kernel import session as kernel_session
    from autograder.kernel import transport as transports

    def add(x, y):
        out = torch.empty_like(x)
        add_kernel[(1,)](x, y, out, x.numel(), BLOCK=64)
        return out

    session = kernel_session.Session(transports.in_process_transport({"add": add}))
    remote_add = session.fetch("add")
    with count_work() as work:
        got = remote_add(torch.ones(50), torch.ones(50))
    assert torch.equal(got, torch.full((50,), 2.0))
    assert work.bytes_loaded == 400 and work.bytes_stored == 200 and work.launches == 1
    got = remote_add(torch.ones(50), torch.ones(50))      # no block open: nothing asked, nothing counted
    assert work.bytes_loaded == 400
    with count_work() as outer:
        with count_work() as inner:
            remote_add(torch.ones(50), torch.ones(50))
    assert inner.bytes_loaded == outer.bytes_loaded == 400   # counted once in each, not twice in the outer


def test_eager_bytes_count_each_operators_inputs_and_outputs():
    x = torch.randn(8, 100)
    _, read, written = count_eager_bytes(torch.softmax, x, -1)
    assert read == written == x.numel() * 4
    _, read, written = count_eager_bytes(lambda t: t.transpose(0, 1).contiguous(), x)  # the view moves nothing
    assert read == written == x.numel() * 4


def test_the_causal_schedule_ends_at_the_diagonal():
    assert key_tiles(48, 16, 16, True) == [[0], [0, 16], [0, 16, 32]]
    assert key_tiles(40, 16, 32, True) == [[0], [0], [0, 32]]
    assert key_tiles(40, 16, 32, False) == [[0, 32]] * 3


def test_where_triton_is_missing_the_message_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(ImportError, match="Colab"):
        load_triton()


def test_grading_interprets_kernels_even_with_a_gpu(monkeypatch):
    """Under nbgrader (NBGRADER_EXECUTION) kernels run in the interpreter, so a grade is the same on any machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert load_triton()[2] is True
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.delenv("TRITON_INTERPRET")
    assert load_triton()[2] is False          # a student's own run with a GPU compiles


def test_a_launcher_cannot_set_the_counts_of_the_block_around_it():
    """The open block's figures were data a launcher could overwrite (bytes_loaded = 0): now read-only."""
    import dataclasses
    with count_work() as work:
        with pytest.raises(dataclasses.FrozenInstanceError):
            kernels.counting()[-1].bytes_loaded = 0
    assert work.bytes_loaded == 0 and work.launches == 0


def test_a_view_with_no_alias_annotation_moves_nothing():
    """`a @ b` on 4-D tensors ends in aten._unsafe_view (metadata only, no alias annotation in its schema): it
    was counted as reading and writing the whole product, inflating naive attention's bytes by a third."""
    a, b = torch.randn(1, 2, 128, 16), torch.randn(1, 2, 16, 128)
    _, read, written = count_eager_bytes(lambda a, b: a @ b, a, b)
    assert (read, written) == ((a.numel() + b.numel()) * 4, 2 * 128 * 128 * 4)
    x = torch.randn(100, 10)
    assert count_eager_bytes(lambda x: x.add_(1), x)[1:] == (4000, 4000)  # in place still reads and writes
