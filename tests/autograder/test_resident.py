"""Memory decided outside the kernel (issue 56): the lessons' memory tests, graded as root grades them, against the five
ways a withheld hostile round forged memory (each had full marks and no flag before).

Each case runs one lesson's real test cell on this side (verdicts.py) against a sandboxed kernel (bubblewrap, its own
uid and memory cgroup, as `python -m autograder grade` starts it) whose notebook defines the forged answer; the grader
reads what each measured call held from the kernel's cgroup (sandbox.KernelCgroup). A forgery fails its memory test;
the honest answer beside it keeps full marks and no note. Without a cgroup (grading without root), a forgery that moves
tensor data to numpy is flagged from the notebook's source instead. The kernel cannot hide what it touched by clearing its
own pages' accessed bits (sandbox/confine.py). Root and bubblewrap only (skipped elsewhere, failed in CI), except the
no-cgroup cases.
"""
import asyncio
import tempfile
import textwrap
import time

import pytest

from autograder.kernel import verdicts
from autograder.kernel import session as kernel_session
from autograder.kernel import transport as transports
from tests.nbtools import SOLUTIONS, load

LESSONS = {"08": "08_fast_attention", "09": "09_flash_backward_and_batching"}
IMPORTS = "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"


def solution(lesson, grade_id):
    """The solution's answer cell `grade_id`, as a student who copied it would hand it in."""
    cell = next(c for c in load(SOLUTIONS / f"{LESSONS[lesson]}.ipynb").cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(line for line in cell.source.splitlines() if "### BEGIN" not in line and "### END" not in line)


# The full (L, L) scores of the lessons' largest memory tests, each held where the kernel's own count does not see it
F1_BUFFER_TOUCHED_BEFORE = '''
_buffer = np.ones((1, 4, 4096, 4096), np.float32)   # the full scores' size, made resident long before any test
_scores = torch.from_numpy(_buffer)

def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
    """Untiled attention whose (L_q, L_k) scores go, at the memory test's size, into the buffer made above."""
    L_q, L_k = q.shape[2], k.shape[2]
    reuse = q.dtype == torch.float32 and (*q.shape[:3], L_k) == tuple(_scores.shape)
    scores = torch.matmul(q, k.transpose(-2, -1), out=_scores) if reuse else q @ k.transpose(-2, -1)
    scores.mul_(1 / math.sqrt(q.shape[-1]))
    allowed = torch.ones(L_q, L_k, dtype=torch.bool)
    allowed = (allowed.tril(L_k - L_q) if causal else allowed).expand(q.shape[0], 1, L_q, L_k)
    if key_lengths is not None:
        allowed = allowed & (torch.arange(L_k) < key_lengths[:, None, None, None])
    scores.masked_fill_(~allowed, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    scores.sub_(torch.where(torch.isinf(m), torch.zeros_like(m), m)).exp_()
    s = scores.sum(-1, keepdim=True)
    return torch.where(s > 0, (scores @ v) / s.clamp_min(1e-30), torch.zeros(()))
'''
F2_NUMPY_AND_COPY = '''
import importlib
_c = importlib.import_module("c" + "types")

def _array(t):
    """A tensor's data in numpy, read through its storage's address (no tensor method the kernel's watch names)."""
    data = _c.string_at(t.storage().data_ptr(), t.numel() * t.element_size())
    return np.frombuffer(data, dtype=str(t.dtype).replace("torch.", "")).reshape(t.shape)

def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    """The full weights in numpy, copied into torch's outputs."""
    Q, K, V, O, LSE, DO = (_array(t) for t in (q, k, v, o, lse, grad_o))
    L_q, L_k = Q.shape[2], K.shape[2]
    scale = 1 / math.sqrt(Q.shape[-1])
    P = Q @ K.swapaxes(-1, -2) * scale
    if causal:
        P[..., ~np.tri(L_q, L_k, L_k - L_q, dtype=bool)] = -np.inf
    np.exp(P - LSE[..., None], out=P)
    dV = P.swapaxes(-1, -2) @ DO
    dS = DO @ V.swapaxes(-1, -2)
    dS -= (DO * O).sum(-1)[..., None]
    dS *= P
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    for tensor, array in ((dq, dS @ K * scale), (dk, dS.swapaxes(-1, -2) @ Q * scale), (dv, dV)):
        tensor.copy_(torch.from_numpy(array))
    return dq, dk, dv
'''
F3_CTYPES = '''
import importlib
_c = importlib.import_module("c" + "types")

def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    """The weights of each block of queries against every key, kept whole as bytes outside torch (ctypes.memmove)
    and read back a block at a time: no tensor as large as the weights, and all of them held at once."""
    B, H, L_q, d = q.shape
    L_k, scale, size = k.shape[2], 1 / math.sqrt(d), q.element_size()
    kept = _c.create_string_buffer(B * H * L_q * L_k * size)
    starts = range(0, L_q, block_q)
    for i0 in starts:
        n = min(block_q, L_q - i0)
        p = torch.exp(q[:, :, i0:i0 + n] @ k.transpose(-2, -1) * scale - lse[:, :, i0:i0 + n, None])
        if causal:
            p = p.masked_fill(torch.arange(L_k) > torch.arange(i0, i0 + n)[:, None] + (L_k - L_q), 0.0)
        p = p.contiguous()
        _c.memmove(_c.addressof(kept) + B * H * i0 * L_k * size, p.storage().data_ptr(), p.numel() * size)
    D = (grad_o * o).sum(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i0 in starts:
        n = min(block_q, L_q - i0)
        p = torch.frombuffer(kept, dtype=q.dtype, count=B * H * n * L_k, offset=B * H * i0 * L_k * size)
        p = p.view(B, H, n, L_k)
        do_i = grad_o[:, :, i0:i0 + n]
        ds = p * (do_i @ v.transpose(-2, -1) - D[:, :, i0:i0 + n, None])
        dv += p.transpose(-2, -1) @ do_i
        dq[:, :, i0:i0 + n] = ds @ k * scale
        dk += ds.transpose(-2, -1) @ q[:, :, i0:i0 + n] * scale
    return dq, dk, dv
'''
_UNTILED_BACKWARD = '''
def _untiled(q, k, v, o, lse, grad_o, causal):
    scale = 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale
    if causal:
        L_q, L_k = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q), float("-inf"))
    p = torch.exp(scores - lse[..., None])
    ds = p * (grad_o @ v.transpose(-2, -1) - (grad_o * o).sum(-1, keepdim=True))
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ grad_o
'''
F4_FORMATTER = _UNTILED_BACKWARD + '''
import re
# the answer's memory figures rewritten as IPython formats the request's result, after the call
get_ipython().display_formatter.formatters["text/plain"].for_type(
    str, lambda text, p, cycle: p.text(repr(re.sub(r'"memory": ?\\[\\d+, ?\\d+\\]', '"memory": [0, 0]', text))))

def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    return _untiled(q, k, v, o, lse, grad_o, causal)
'''
F5_METERS_ZEROED = _UNTILED_BACKWARD + '''
from course_utils.ambient import AMBIENT
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    out = _untiled(q, k, v, o, lse, grad_o, causal)
    for meter in list(AMBIENT.memory) + [m for m in _get_current_dispatch_mode_stack() if hasattr(m, "peak_bytes")]:
        meter.peak_bytes = meter.largest_bytes = meter.live_bytes = 0   # the call's own meters, as data
    return out
'''
_RETURN = "    return torch.where(s > 0, (scores @ v) / s.clamp_min(1e-30), torch.zeros(()))"
_FORGET = "    out = torch.where(s > 0, (scores @ v) / s.clamp_min(1e-30), torch.zeros(()))\n    try:\n        {}\n" \
          "    except OSError:\n        pass\n    return out"
F1_BITS_CLEARED = F1_BUFFER_TOUCHED_BEFORE.replace(_RETURN, _FORGET.format("open('/proc/self/clear_refs', 'w').write('1')"))
F1_PAGES_COLD = F1_BUFFER_TOUCHED_BEFORE.replace(
    "_buffer = np.ones((1, 4, 4096, 4096), np.float32)",
    "import mmap\n_map = mmap.mmap(-1, 4 * 4096 * 4096 * 4)\n"
    "_buffer = np.frombuffer(_map, np.float32).reshape(1, 4, 4096, 4096)\n_buffer[:] = 1").replace(
    _RETURN, _FORGET.format("_map.madvise(20)  # MADV_COLD"))
FORGERIES = {  # name: (lesson, test cell, the notebook's code)
    "numpy buffers touched before the measured call": ("08", "test_tiled_attention", F1_BUFFER_TOUCHED_BEFORE),
    "the full weights computed in numpy and copied in with copy_": ("09", "test_flash_backward", F2_NUMPY_AND_COPY),
    "the bytes moved with ctypes.memmove": ("09", "test_flash_backward", F3_CTYPES),
    "IPython's formatter rewriting the memory figures": ("09", "test_flash_backward", F4_FORMATTER),
    "the call's own meters zeroed as data": ("09", "test_flash_backward", F5_METERS_ZEROED),
    # and what would hide the first from the grader's reading: the kernel clearing its own pages' accessed bits
    "the accessed bits cleared through /proc/self/clear_refs": ("08", "test_tiled_attention", F1_BITS_CLEARED),
    "the buffer's pages made cold (madvise MADV_COLD)": ("08", "test_tiled_attention", F1_PAGES_COLD),
}
HONEST = {"08": ("test_tiled_attention", ["online_softmax_update", "tiled_attention"]),
          "09": ("test_flash_backward", ["flash_backward"])}


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    from autograder import sandbox
    from autograder.sandbox.limits import Limits
    from autograder.sandbox import sandbox_settings
    from tests.prerequisites import require, why_no_full_sandbox
    require(why_no_full_sandbox())
    found, warnings = sandbox.probe(sandbox_settings(tmp_path_factory.mktemp("course"), Limits()))
    assert found["bwrap"] and found["separate_user"] and found["cgroup"], warnings
    return found


class SandboxedKernel:
    """A kernel started as grading starts one, and a Session that reads its memory cgroup (or none: cgroup=False)."""

    def __init__(self, settings):
        from autograder import sandbox
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.folder = tempfile.TemporaryDirectory()
        self.km = sandbox.SandboxKernelManager(kernel_name="python3")
        self.km.sandbox = settings
        self.loop.run_until_complete(self.km.start_kernel(cwd=self.folder.name))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.loop.run_until_complete(self.kc.wait_for_ready(timeout=120))
        self.cgroup = sandbox.KernelCgroup.of(str(self.km.provisioner.pid))

    def run(self, code):
        """What `code` printed in the kernel (it must not raise)."""
        from jupyter_core.utils import run_sync
        printed = []
        hook = lambda msg: printed.append(msg["content"].get("text", "") if msg["msg_type"] == "stream" else "")  # noqa: E731
        reply = run_sync(self.kc.execute_interactive)(IMPORTS + textwrap.dedent(code), timeout=300, output_hook=hook)
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(printed)

    def grade(self, lesson, grade_id, code):
        """(the test cell's error or None, the notes a reviewer would see) with `code` run in the kernel first."""
        from jupyter_core.utils import run_sync
        self.run(code)
        transport = transports.kernel_transport(
            self.kc, run_sync(self.kc.shell_channel.get_msg), deadline=lambda: time.monotonic() + 300,
            on_timeout=run_sync(self.km.interrupt_kernel), is_alive=run_sync(self.km.is_alive),
            get_stdin_msg=run_sync(self.kc.stdin_channel.get_msg))
        session = kernel_session.Session(transport, cgroup=self.cgroup)
        error = verdicts.LessonTests(load(SOLUTIONS / f"{LESSONS[lesson]}.ipynb")).runner(session).run(grade_id)[1]
        return error, session.take_notes()

    def close(self):
        self.kc.stop_channels()
        self.loop.run_until_complete(self.km.shutdown_kernel(now=True))
        self.loop.close()
        self.folder.cleanup()


@pytest.fixture(scope="module")
def kernels(settings):
    """One sandboxed kernel per lesson, made when first asked for: the honest answer runs first in each, and IPython's
    formatter (which stays registered) last."""
    started = {}

    def kernel(lesson):
        if lesson not in started:
            started[lesson] = SandboxedKernel(settings)
            assert started[lesson].cgroup is not None, "no readable memory cgroup for the sandboxed kernel"
        return started[lesson]
    yield kernel
    for k in started.values():
        k.close()


@pytest.mark.parametrize("lesson", sorted(HONEST))
def test_an_honest_answer_measured_from_outside_keeps_full_marks_and_no_note(kernels, lesson):
    grade_id, answers = HONEST[lesson]
    code = "\n".join(solution(lesson, a) for a in answers)
    assert kernels(lesson).grade(lesson, grade_id, code) == (None, [])


@pytest.mark.parametrize("name", list(FORGERIES))
def test_memory_forged_inside_the_kernel_fails_its_test_when_the_cgroup_decides(kernels, name):
    lesson, grade_id, code = FORGERIES[name]
    error, notes = kernels(lesson).grade(lesson, grade_id, code)
    assert error is not None and ("held" in str(error) or "made a tensor" in str(error)), (error, notes)


def test_the_kernel_can_neither_clear_its_accessed_bits_nor_make_its_pages_cold(kernels):
    """sandbox/confine.py: no write under /proc (Landlock), no madvise that forgets accessed pages (seccomp)."""
    printed = kernels("09").run("""
        import mmap
        try:
            open('/proc/self/clear_refs', 'w').write('1')
            print('cleared')
        except OSError as e:
            print(e.errno)
        _pages = mmap.mmap(-1, 1 << 20)
        _pages.write(b'x' * 4096)
        for advice in (20, 21, 8):  # MADV_COLD, MADV_PAGEOUT, MADV_FREE
            try:
                _pages.madvise(advice)
                print('forgotten')
            except OSError as e:
                print(e.errno)
        """)
    assert printed.split() == ["13", "1", "1", "1"], printed  # EACCES (Landlock), EPERM (seccomp)


# Without a cgroup (grading without root) the kernel's own count decides, and sees no numpy: the notebook's source
# names where the data went, beside the memory test (an integrity: flag), and an honest notebook gets no note


@pytest.fixture(scope="module")
def plain_kernel():
    from tests.autograder.test_verdicts import _started_kernel
    started = _started_kernel()
    yield next(started)
    next(started, None)


def counted_inside(kernel, code, lesson="09", grade_id="test_flash_backward"):
    """(error, notes) of a test cell graded with the kernel's own count only, the source's data moves given."""
    from autograder.flags import data_moves
    from tests.autograder.test_verdicts import run_in_kernel
    km, kc = kernel
    assert run_in_kernel(kc, IMPORTS + textwrap.dedent(code)) == "ok"
    session = kernel_session.Session(transports.kernel_transport(
        kc, kc.get_shell_msg, deadline=lambda: time.monotonic() + 300, on_timeout=km.interrupt_kernel,
        is_alive=km.is_alive, get_stdin_msg=kc.get_stdin_msg))
    session.moves = tuple(data_moves([(5, code)]))
    error = verdicts.LessonTests(load(SOLUTIONS / f"{LESSONS[lesson]}.ipynb")).runner(session).run(grade_id)[1]
    return error, session.take_notes()


def test_without_a_cgroup_numpy_moved_during_a_memory_test_is_flagged_from_the_source(plain_kernel):
    error, notes = counted_inside(plain_kernel, F2_NUMPY_AND_COPY)
    assert any("counted only in the kernel" in n and "cell 5, line 6: .storage" in n for n in notes), (error, notes)


def test_without_a_cgroup_an_honest_answer_is_not_flagged(plain_kernel):
    assert counted_inside(plain_kernel, solution("09", "flash_backward")) == (None, [])
