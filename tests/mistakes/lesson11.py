"""Lesson 11's hidden tests catch the common mistakes in Triton kernels and pass other correct kernels.

A mistake is the lesson's own solution cell with one change (`_variant`), so that each case differs from a
correct kernel exactly where the mistake is; the alternatives are other correct kernels written out in full.
Every kernel runs in Triton's interpreter, as in grading on a machine without a GPU.
"""
import json
import pathlib
import textwrap

LESSON = "11_flash_attention_kernel"
_NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "solutions" / f"{LESSON}.ipynb"


def _solution(grade_id):
    """The solution cell's source, as a student who finished it would have it."""
    for cell in json.loads(_NOTEBOOK.read_text())["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            lines = "".join(cell["source"]).splitlines()
            return "\n".join(line for line in lines if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    raise KeyError(grade_id)


def _variant(grade_id, *changes):
    """The solution cell with each (old, new) applied; old must occur exactly once."""
    source = _solution(grade_id)
    for old, new in changes:
        assert source.count(old) == 1, (grade_id, old)
        source = source.replace(old, new)
    return source


_LOOP_END = "end = tl.minimum((tile + 1) * BLOCK_Q, L)          # later key tiles lie wholly in the future"
_LSE_STORE = "    tl.store(lse_ptr + head * L + rows, m + tl.log(s), mask=rows < L)"

_COPY_KERNEL = textwrap.dedent("""
    @triton.jit
    def copy_flat(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)

""")

MISTAKES = {
    # Exercise 1: the fused softmax
    "softmax: masked columns loaded as 0": ("test_softmax_rows", _variant(
        "softmax_rows", ('other=float("-inf")', "other=0.0")), 'padded with zeros to the block width'),
    "softmax: no max subtracted (overflows)": ("test_softmax_rows", _variant(
        "softmax_rows", ("    x = x - tl.max(x, axis=0)\n", "")), 'exp(1e4) overflows'),
    "softmax: rows read n_cols apart, not row_stride": ("test_softmax_rows", _variant(
        "softmax_rows", ("x_ptr + row * row_stride + cols", "x_ptr + row * n_cols + cols")),
        'read the rows n_cols elements apart'),
    "softmax: a float32 result for float64 input": ("test_softmax_rows", _variant(
        "softmax_rows", ("y = torch.empty(R, C, dtype=x.dtype, device=x.device)",
                         "y = torch.empty(R, C, device=x.device)")), "allocate the result with x's dtype"),
    "softmax: the row loaded twice (max, then exp)": ("test_softmax_rows", _variant(
        "softmax_rows", ("    x = x - tl.max(x, axis=0)\n",
                         "    top = tl.max(x, axis=0)\n"
                         "    x = tl.load(x_ptr + row * row_stride + cols, mask=inside, other=float('-inf')) - top\n")),
        'read every element of x 2 times'),
    "softmax: computed by PyTorch, not a kernel": ("test_softmax_rows", textwrap.dedent("""
        def softmax_rows(x):
            e = (x - x.max(dim=-1, keepdim=True).values).exp()
            return e / e.sum(dim=-1, keepdim=True)
    """), 'launched no Triton kernel'),
    # Exercise 2: the forward kernel
    "forward: running max not carried between key tiles": ("test_flash_forward", _variant(
        "flash_forward", ("m_new = tl.maximum(m, tl.max(scores, axis=1))", "m_new = tl.max(scores, axis=1)")),
        'running max carries over'),
    "forward: acc not rescaled when the max rises": ("test_flash_forward", _variant(
        "flash_forward", ("acc = acc * rescale[:, None] + tl.dot", "acc = acc + tl.dot")), 'acc was not rescaled'),
    "forward: keys past L not masked in the scores": ("test_flash_forward", _variant(
        "flash_forward", ("keep = cols[None, :] < L\n", "keep = cols[None, :] >= 0\n")),
        'kept the score 0 and counted in every row'),
    "forward: the causal loop stops one tile early": ("test_flash_forward", _variant(
        "flash_forward", (_LOOP_END, "end = tl.minimum(tile * BLOCK_Q, L)")), 'first query tile read no key'),
    "forward: the causal loop runs one tile too far": ("test_flash_forward", _variant(
        "flash_forward", (_LOOP_END, "end = tl.minimum((tile + 2) * BLOCK_Q, L)")), 'runs one query tile too far'),
    "forward: causal by the mask alone, no tile skipped": ("test_flash_forward", _variant(
        "flash_forward", (_LOOP_END, "end = L")), 'the causal loop visits every key tile'),
    "forward: causal mask leaves out the diagonal": ("test_flash_forward", _variant(
        "flash_forward", ("keep = keep & (cols[None, :] <= rows[:, None])",
                          "keep = keep & (cols[None, :] < rows[:, None])")), 'itself included'),
    "forward: lse stored before the last key tile": ("test_flash_forward", _variant(
        "flash_forward", (_LSE_STORE + "\n", ""),
        ("        scores = tl.dot(q, tl.trans(k)) * scale\n",
         "        tl.store(lse_ptr + head * L + rows, m + tl.log(s), mask=rows < L)\n"
         "        scores = tl.dot(q, tl.trans(k)) * scale\n")), 'stored before the last key tile'),
    "forward: lse stored after every key tile": ("test_flash_forward", _variant(
        "flash_forward", (_LSE_STORE + "\n", ""),
        ("        m = m_new\n", "        m = m_new\n"
                                "        tl.store(lse_ptr + head * L + rows, m + tl.log(s), mask=rows < L)\n")),
        'stored after every key tile'),
    "forward: scores not scaled by 1/sqrt(d)": ("test_flash_forward", _variant(
        "flash_forward", ("        scores = tl.dot(q, tl.trans(k)) * scale\n",
                          "        scores = tl.dot(q, tl.trans(k))\n")), 'scores were not scaled'),
    "forward: running max started at 0 (underflows for large negative scores)": ("test_flash_forward", _variant(
        "flash_forward", ('m = tl.full((BLOCK_Q,), float("-inf"), dtype=ACC)', "m = tl.zeros((BLOCK_Q,), dtype=ACC)")),
        'must start at -inf, not 0'),
    "forward: query tile re-loaded in every iteration": ("test_flash_forward", _variant(
        "flash_forward", ("        scores = tl.dot(q, tl.trans(k)) * scale\n",
                          "        q = tl.load(q_ptr + start + rows[:, None] * D + dims[None, :], mask=rows[:, None] < L,"
                          " other=0.0)\n        scores = tl.dot(q, tl.trans(k)) * scale\n")),
        'query tile is loaded again at every key tile'),
    "forward: lse in the wrong units (log of the sum, no max)": ("test_flash_forward", _variant(
        "flash_forward", ("m + tl.log(s), mask=rows < L)", "tl.log(s), mask=rows < L)")), 'log(s) alone'),
    # Exercise 3: the backward kernels
    "backward: dk not scaled by 1/sqrt(d)": ("test_flash_backward", _variant(
        "flash_backward", ("dk += tl.dot(tl.trans(ds).to(q.dtype), q) * scale", "dk += tl.dot(tl.trans(ds).to(q.dtype), q)")),
        'dk lacks the factor 1/sqrt(d)'),
    "backward: D left out of dS": ("test_flash_backward", _variant(
        "flash_backward", ("delta = (grad_o * o).sum(-1)", "delta = torch.zeros_like(lse)")), 'without D'),
    "backward: D from dO and V instead of dO and O": ("test_flash_backward", _variant(
        "flash_backward", ("delta = (grad_o * o).sum(-1)", "delta = (grad_o * v).sum(-1)")),
        'D was summed from dO * V'),
    "backward: P not recomputed from lse (exp of raw scores)": ("test_flash_backward", _variant(
        "flash_backward", ("p = tl.where(keep, tl.exp(scores - lse[:, None]), 0.0)\n        dv +=",
                           "p = tl.where(keep, tl.exp(scores), 0.0)\n        dv +=")), 'without the log-sum-exp'),
    "backward: P not masked under the causal mask": ("test_flash_backward", _variant(
        "flash_backward", ("        p = tl.where(keep, tl.exp(scores - lse[:, None]), 0.0)\n        dv +=",
                           "        p = tl.exp(scores - lse[:, None])\n        dv +=")),
        'P was not set to 0 where the key comes after the query'),
    "backward: dk/dv kernel starts its causal loop one query tile late": ("test_flash_backward", _variant(
        "flash_backward", ("first = (tile * BLOCK_K // BLOCK_Q) * BLOCK_Q", "first = (tile * BLOCK_K // BLOCK_Q + 1) * BLOCK_Q")),
        'starts its causal loop one query tile late'),
    "backward: dk/dv kernel visits every query tile under the causal mask": ("test_flash_backward", _variant(
        "flash_backward", ("first = (tile * BLOCK_K // BLOCK_Q) * BLOCK_Q", "first = 0")),
        'dk/dv kernel visits every query tile'),
    "backward: dk/dv causal start assumes BLOCK_Q == BLOCK_K": ("test_flash_backward", _variant(
        "flash_backward", ("first = (tile * BLOCK_K // BLOCK_Q) * BLOCK_Q", "first = tile * BLOCK_Q")),
        'assumes BLOCK_Q == BLOCK_K'),
    "backward: gradients returned as dk, dq, dv": ("test_flash_backward", _variant(
        "flash_backward", ("    return dq, dk, dv", "    return dk, dq, dv")), 'return (dq, dk, dv)'),
    # Exercise 4: the Function
    "forward: the launcher does not make its inputs contiguous": ("test_flash_forward", _variant(
        "flash_forward", ("    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()\n", "")),
        'make q, k and v contiguous'),
    "backward: keys past L left unmasked in the dq kernel (NaN when a row's lse is below -88.7)": (
        "test_flash_backward", _variant("flash_backward", (
            "        keep = (rows[:, None] < L) & (cols[None, :] < L)\n        if CAUSAL:\n"
            "            keep = keep & (cols[None, :] <= rows[:, None])\n"
            "        p = tl.where(keep, tl.exp(scores - lse[:, None]), 0.0)\n"
            "        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])\n        dq +=",
            "        keep = (rows[:, None] < L) & (cols[None, :] >= 0)\n        if CAUSAL:\n"
            "            keep = keep & (cols[None, :] <= rows[:, None])\n"
            "        p = tl.where(keep, tl.exp(scores - lse[:, None]), 0.0)\n"
            "        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])\n        dq +=")),
        'a key past L, loaded as 0, has the score 0'),
    "backward: the launcher does not make its inputs contiguous": ("test_flash_backward", _variant(
        "flash_backward", ("    q, k, v, o, lse, grad_o = (t.contiguous() for t in (q, k, v, o, lse, grad_o))\n", "")),
        'make q, k, v, o, lse and grad_o contiguous'),
    "backward: the dq kernel's causal loop stops one key tile early": ("test_flash_backward", _variant(
        "flash_backward", ("        end = tl.minimum((tile + 1) * BLOCK_Q, L)\n    for j0", "        end = tl.minimum(tile * BLOCK_Q, L)\n    for j0")),
        "dq kernel's causal loop stops one key tile early"),
    "Function: backward returns only dq, dk, dv": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("return dq, dk, dv, None, None, None", "return dq, dk, dv")), 'six values'),
    "Function: forward ignores causal": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("o, lse = flash_forward(q, k, v, causal, block_q, block_k)",
                                 "o, lse = flash_forward(q, k, v, False, block_q, block_k)")),
        'attention with causal=False'),
    "Function: dk and dv swapped": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("return dq, dk, dv, None, None, None", "return dq, dv, dk, None, None, None")),
        'dv where dk belongs'),
    "Function: backward calls flash_backward without the saved mask and blocks": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("flash_backward(q, k, v, o, lse, grad_o, ctx.causal, ctx.block_q, ctx.block_k)",
                                 "flash_backward(q, k, v, o, lse, grad_o)")), 'flash_backward without the mask'),
    "Function: flash_attention calls forward directly (no gradients)": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("return FlashAttentionKernel.apply(q, k, v, causal, block_q, block_k)",
                                 "return flash_forward(q, k, v, causal, block_q, block_k)[0]")),
        'flash_backward never ran'),
    # The work done where the test does not count it (issue: the launcher computes, the kernel only moves data)
    "softmax: a kernel that copies each row, the softmax computed in PyTorch": ("test_softmax_rows", _variant(
        "softmax_rows",
        ("    x = x - tl.max(x, axis=0)\n    e = tl.exp(x)\n    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), "
         "mask=inside)", "    tl.store(y_ptr + row * n_cols + cols, x, mask=inside)"),
        ("    return y", "    e = (y - y.max(dim=-1, keepdim=True).values).exp()\n    return e / e.sum(dim=-1, keepdim=True)")),
        'launched a Triton kernel but computed the softmax in PyTorch'),
    "forward: the kernel loads the tiles, the launcher computes attention by broadcasting": ("test_flash_forward",
                                                                                              _variant(
        "flash_forward", ("    return o, lse", "    scores = (q[:, :, :, None, :] * k[:, :, None, :, :]).sum(-1) / math.sqrt(d)\n"
                          "    if causal:\n"
                          "        scores = scores.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float('-inf'))\n"
                          "    top = scores.amax(-1, keepdim=True)\n    w = (scores - top).exp()\n"
                          "    lse = (top[..., 0] + w.sum(-1).log()).to(lse.dtype)\n"
                          "    return ((w / w.sum(-1, keepdim=True))[..., None] * v[:, :, None, :, :]).sum(-2), lse")),
        'computed with torch.ops.aten.mul in PyTorch'),
    "Function: flash_attention returns PyTorch's attention beside an unused Function": ("test_flash_attention", _variant(
        "FlashAttentionKernel", ("return FlashAttentionKernel.apply(q, k, v, causal, block_q, block_k)",
                                 "return F.scaled_dot_product_attention(q, k, v, is_causal=causal)")),
        ('called an operator this exercise forbids', 'FlashAttentionKernel.apply')),
    # float64 inputs computed in float32 inside a kernel, and padded columns taken into a row's max (the review of
    # 2026-11-28b, items I4 and I6: each passed every hidden test before the tests probed them)
    "softmax: float64 input computed in float32 (the row loaded .to(tl.float32))": ("test_softmax_rows", _variant(
        "softmax_rows", ('other=float("-inf"))', 'other=float("-inf")).to(tl.float32)')), "float32's rounding"),
    "softmax: padded columns loaded as 0 enter the row max, masked only after the exponential": (
        "test_softmax_rows", _variant(
            "softmax_rows", ('other=float("-inf"))', "other=0.0)"),
            ("    e = tl.exp(x)\n", "    e = tl.where(inside, tl.exp(x), 0.0)\n")), "entered the row's max"),
    "forward: float64 inputs computed in float32 (q, k, v loaded .to(tl.float32))": ("test_flash_forward", _variant(
        "flash_forward", *[(f"{t} = tl.load({t}_ptr + start + {r}[:, None] * D + dims[None, :], mask={r}[:, None] < L, "
                            "other=0.0)\n",
                            f"{t} = tl.load({t}_ptr + start + {r}[:, None] * D + dims[None, :], mask={r}[:, None] < L, "
                            "other=0.0).to(tl.float32)\n") for t, r in (("q", "rows"), ("k", "cols"), ("v", "cols"))]),
        "float32's rounding"),
    "forward: lse allocated in float32 for float64 inputs": ("test_flash_forward", _variant(
        "flash_forward", ("lse = torch.empty(B, H, L, dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,",
                          "lse = torch.empty(B, H, L, dtype=torch.float32,")),
        'lse is torch.float32 for float64 inputs'),
    "forward: padded keys' scores (0) enter the running max, masked only after the exponential": (
        "test_flash_forward", _variant(
            "flash_forward", ("        keep = cols[None, :] < L\n", "        keep = cols[None, :] >= 0\n"),
            ("        p = tl.exp(scores - m_new[:, None])\n",
             "        p = tl.where(cols[None, :] < L, tl.exp(scores - m_new[:, None]), 0.0)\n")),
        'took part in the running max'),
    "backward: float64 inputs computed in float32 (q, k, v, dO loaded .to(tl.float32) in both kernels)": (
        "test_flash_backward", _variant(
            "flash_backward", *[(f"\n{ind}{t} = tl.load({t}_ptr + start + {r}[:, None] * D + dims[None, :], "
                                 f"mask={r}[:, None] < L, other=0.0)\n",
                                 f"\n{ind}{t} = tl.load({t}_ptr + start + {r}[:, None] * D + dims[None, :], "
                                 f"mask={r}[:, None] < L, other=0.0).to(tl.float32)\n")
                                for ind in ("    ", "        ")
                                for t, r in (("q", "rows"), ("do", "rows"), ("k", "cols"), ("v", "cols"))]),
        "float32's rounding"),
    # Laundering (issue 56): the result computed outside the kernels and carried in by kernels that only copy it, a
    # forward with no tile product, a Function that calls the stand-ins as decoys. (What a graded kernel loads from
    # outside the call's inputs is counted in the grader's meter: tests/autograder/test_kernel_meter.py.)
    "softmax: computed in numpy, carried in by a kernel that copies the rows": ("test_softmax_rows", _COPY_KERNEL + (
        textwrap.dedent("""
        def softmax_rows(x):
            import numpy as np
            a = x.numpy()
            e = np.exp(a - a.max(-1, keepdims=True))
            p = torch.from_numpy(e / e.sum(-1, keepdims=True))
            y = torch.empty_like(x, memory_format=torch.contiguous_format)
            copy_flat[(triton.cdiv(p.numel(), 256),)](p, y, p.numel(), BLOCK=256)
            return y
    """)), 'exponentials for the'),
    "forward: attention computed in numpy, o and lse carried in by a copy kernel": ("test_flash_forward", _COPY_KERNEL + (
        textwrap.dedent("""
        def flash_forward(q, k, v, causal=False, block_q=16, block_k=16):
            import numpy as np
            Q, K, V = (t.contiguous().numpy().astype(np.float64) for t in (q, k, v))
            s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
            if causal:
                s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
            top = s.max(-1, keepdims=True)
            e = np.exp(s - top)
            total = e.sum(-1, keepdims=True)
            o = torch.empty_like(q, memory_format=torch.contiguous_format)
            lse = torch.empty(q.shape[:3], dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
            for out, value in ((o, (e / total) @ V), (lse, (top + np.log(total))[..., 0])):
                src = torch.from_numpy(np.ascontiguousarray(value.astype(out.numpy().dtype)))
                copy_flat[(triton.cdiv(src.numel(), 256),)](src, out, src.numel(), BLOCK=256)
            return o, lse
    """)), 'exponentials, fewer than'),
    "forward: no tile product (scores and acc from broadcast products and tl.sum)": ("test_flash_forward", _variant(
        "flash_forward", ("scores = tl.dot(q, tl.trans(k)) * scale",
                          "scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale"),
        ("acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)",
         "acc = acc * rescale[:, None] + tl.sum(p.to(v.dtype)[:, :, None] * v[None, :, :], axis=1)")),
        'FLOPs in tl.dot, fewer than'),
    "Function: attention recomputed in numpy, flash_forward and flash_backward called as decoys": (
        "test_flash_attention", textwrap.dedent("""
        import numpy as _np


        def _numpy_attention(q, k, v, causal):
            Q, K, V = (t.detach().numpy().astype(_np.float64) for t in (q, k, v))
            s = Q @ K.swapaxes(-1, -2) / _np.sqrt(Q.shape[-1])
            if causal:
                s = _np.where(_np.tril(_np.ones(s.shape[-2:], dtype=bool)), s, -_np.inf)
            p = _np.exp(s - s.max(-1, keepdims=True))
            return Q, K, V, p / p.sum(-1, keepdims=True)


        class FlashAttentionKernel(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=16, block_k=16):
                flash_forward(q, k, v, causal, block_q, block_k)  # a decoy: its result is never used
                ctx.save_for_backward(q, k, v)
                ctx.causal, ctx.blocks = causal, (block_q, block_k)
                _, _, V, p = _numpy_attention(q, k, v, causal)
                return torch.from_numpy((p @ V).astype(q.detach().numpy().dtype))

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v = ctx.saved_tensors
                Q, K, V, p = _numpy_attention(q, k, v, ctx.causal)
                dO = grad_o.detach().numpy().astype(_np.float64)
                o, lse = flash_forward(q, k, v, ctx.causal, *ctx.blocks)
                flash_backward(q, k, v, o, lse, grad_o, ctx.causal, *ctx.blocks)  # a decoy
                dp = dO @ V.swapaxes(-1, -2)
                ds = p * (dp - (dO * (p @ V)).sum(-1, keepdims=True))
                scale, dtype = 1 / _np.sqrt(Q.shape[-1]), q.detach().numpy().dtype
                grads = (ds @ K * scale, ds.swapaxes(-1, -2) @ Q * scale, p.swapaxes(-1, -2) @ dO)
                return (*(torch.from_numpy(_np.ascontiguousarray(g.astype(dtype))) for g in grads), None, None, None)


        def flash_attention(q, k, v, causal=False, block_q=16, block_k=16):
            return FlashAttentionKernel.apply(q, k, v, causal, block_q, block_k)
    """), 'computed again another way'),
}

ALTERNATIVES = {
    "softmax with exp2 and a fixed minimum block": ("test_softmax_rows", textwrap.dedent("""
        @triton.jit
        def softmax_kernel(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            offsets = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * row_stride + offsets, mask=offsets < n_cols, other=-float("inf"))
            z = (x - tl.max(x, 0)) * 1.4426950408889634          # log2(e): exp(x) = exp2(x log2 e)
            num = tl.exp2(z)
            tl.store(y_ptr + row * n_cols + offsets, num / tl.sum(num, 0), mask=offsets < n_cols)

        def softmax_rows(x):
            out = torch.empty_like(x, memory_format=torch.contiguous_format)
            block = max(16, triton.next_power_of_2(x.shape[1]))
            softmax_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=block)
            return out
    """)),
    "softmax with a tl.where after an unfilled masked load": ("test_softmax_rows", textwrap.dedent("""
        @triton.jit
        def softmax_kernel(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
            i = tl.program_id(axis=0)
            c = tl.arange(0, BLOCK)
            ok = c < n_cols
            x = tl.where(ok, tl.load(x_ptr + i * row_stride + c, mask=ok), float("-inf"))
            e = tl.where(ok, tl.exp(x - tl.max(x, axis=0)), 0.0)
            tl.store(y_ptr + i * n_cols + c, e / tl.sum(e, axis=0), mask=ok)

        def softmax_rows(x):
            y = x.new_empty(x.shape)
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
            return y
    """)),
    "forward in base 2 with the causal loop in two phases (off-diagonal tiles unmasked)": ("test_flash_forward",
                                                                                          textwrap.dedent("""
        @triton.jit
        def flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, L, scale,
                                 D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                                 CAUSAL: tl.constexpr, ACC: tl.constexpr):
            t = tl.program_id(0)
            base = tl.program_id(1) * L * D
            r = t * BLOCK_Q + tl.arange(0, BLOCK_Q)
            c0 = tl.arange(0, BLOCK_K)
            e = tl.arange(0, D)
            q = tl.load(q_ptr + base + r[:, None] * D + e[None, :], mask=r[:, None] < L, other=0.0)
            qk_scale = scale * 1.4426950408889634                 # work in base 2: exp(x) = exp2(x log2 e)
            m_i = tl.zeros((BLOCK_Q,), dtype=ACC) - float("inf")
            l_i = tl.zeros((BLOCK_Q,), dtype=ACC)
            acc = tl.zeros((BLOCK_Q, D), dtype=ACC)
            hi = L
            if CAUSAL:
                hi = tl.minimum((t + 1) * BLOCK_Q, L)
            # phase 1: key tiles wholly at or below the diagonal and inside L need no mask (causal only)
            lo = 0
            if CAUSAL:
                lo = tl.minimum((t * BLOCK_Q // BLOCK_K) * BLOCK_K, (L // BLOCK_K) * BLOCK_K)
                for j in range(0, lo, BLOCK_K):
                    kk = tl.load(k_ptr + base + (j + c0)[:, None] * D + e[None, :])
                    vv = tl.load(v_ptr + base + (j + c0)[:, None] * D + e[None, :])
                    qk = tl.dot(q, tl.trans(kk)) * qk_scale
                    m_ij = tl.maximum(m_i, tl.max(qk, 1))
                    p = tl.exp2(qk - m_ij[:, None])
                    alpha = tl.exp2(m_i - m_ij)
                    l_i = l_i * alpha + tl.sum(p, 1)
                    acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv)
                    m_i = m_ij
            # phase 2: the rest, masked
            for j in range(lo, hi, BLOCK_K):
                cols = j + c0
                kk = tl.load(k_ptr + base + cols[:, None] * D + e[None, :], mask=cols[:, None] < L, other=0.0)
                vv = tl.load(v_ptr + base + cols[:, None] * D + e[None, :], mask=cols[:, None] < L, other=0.0)
                qk = tl.dot(q, tl.trans(kk)) * qk_scale
                ok = (cols[None, :] < L) & ((cols[None, :] <= r[:, None]) | (not CAUSAL))
                qk = tl.where(ok, qk, -float("inf"))
                m_ij = tl.maximum(m_i, tl.max(qk, 1))
                p = tl.exp2(qk - m_ij[:, None])
                alpha = tl.exp2(m_i - m_ij)
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv)
                m_i = m_ij
            tl.store(o_ptr + base + r[:, None] * D + e[None, :], acc / l_i[:, None], mask=r[:, None] < L)
            tl.store(lse_ptr + tl.program_id(1) * L + r, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=r < L)

        def flash_forward(q, k, v, causal=False, block_q=16, block_k=16):
            B, H, L, d = q.shape
            o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
            lse = torch.empty((B, H, L), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
                              device=q.device)
            flash_forward_kernel[(triton.cdiv(L, block_q), B * H)](
                q.contiguous(), k.contiguous(), v.contiguous(), o, lse, L, d ** -0.5,
                D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal, ACC=accumulator(q.dtype))
            return o, lse
    """)),
    "forward with the heads on grid axis 0 and an unmasked load when L fits the tiles": ("test_flash_forward",
                                                                                          textwrap.dedent("""
        @triton.jit
        def flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, L, scale,
                                 D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                                 CAUSAL: tl.constexpr, ACC: tl.constexpr):
            head, tile = tl.program_id(0), tl.program_id(1)
            rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
            dims = tl.arange(0, D)
            row_ok = rows < L
            q = tl.load(q_ptr + head * L * D + rows[:, None] * D + dims[None, :], mask=row_ok[:, None], other=0.0)
            best = tl.full((BLOCK_Q,), -float("inf"), ACC)
            total = tl.full((BLOCK_Q,), 0.0, ACC)
            out = tl.full((BLOCK_Q, D), 0.0, ACC)
            stop = tl.minimum((tile + 1) * BLOCK_Q, L) if CAUSAL else L
            for j0 in range(0, stop, BLOCK_K):
                cols = j0 + tl.arange(0, BLOCK_K)
                col_ok = cols < L
                k = tl.load(k_ptr + head * L * D + cols[:, None] * D + dims[None, :], mask=col_ok[:, None], other=0.0)
                v = tl.load(v_ptr + head * L * D + cols[:, None] * D + dims[None, :], mask=col_ok[:, None], other=0.0)
                s = tl.dot(q, tl.trans(k)) * scale
                allowed = col_ok[None, :] & row_ok[:, None]
                if CAUSAL:
                    allowed = allowed & (rows[:, None] >= cols[None, :])
                s = tl.where(allowed, s, -float("inf"))
                new_best = tl.maximum(best, tl.max(s, axis=1))
                safe = tl.where(new_best == -float("inf"), 0.0, new_best)    # rows past L see no key at all
                p = tl.exp(s - safe[:, None])
                shrink = tl.exp(best - safe)
                total = total * shrink + tl.sum(p, axis=1)
                out = out * shrink[:, None] + tl.dot(p.to(v.dtype), v)
                best = new_best
            tl.store(o_ptr + head * L * D + rows[:, None] * D + dims[None, :], out / total[:, None], mask=row_ok[:, None])
            tl.store(lse_ptr + head * L + rows, best + tl.log(total), mask=row_ok)

        def flash_forward(q, k, v, causal=False, block_q=16, block_k=16):
            B, H, L, d = q.shape
            q, k, v = (t.contiguous() for t in (q, k, v))
            o = torch.empty_like(q)
            lse = q.new_empty((B, H, L), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
            flash_forward_kernel[(B * H, triton.cdiv(L, block_q))](q, k, v, o, lse, L, 1.0 / math.sqrt(d), D=d,
                                                                  BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
                                                                  ACC=accumulator(q.dtype))
            return o, lse
    """)),
    "forward with the key tiles visited last to first (a tile wholly ahead of a row guarded)": (
        "test_flash_forward", _variant(
            "flash_forward", ("    for j0 in range(0, end, BLOCK_K):\n",
                              "    last = ((end - 1) // BLOCK_K) * BLOCK_K\n    for step in range(0, end, BLOCK_K):\n"
                              "        j0 = last - step                                # the online softmax takes any order\n"),
            ("        p = tl.exp(scores - m_new[:, None])\n        rescale = tl.exp(m - m_new)\n",
             "        m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)  # causal: the first tile may lie wholly ahead\n"
             "        p = tl.exp(scores - m_safe[:, None])\n        rescale = tl.exp(m - m_safe)\n"))),
    "forward through tensor descriptors (tl.make_tensor_descriptor: the bounds checked by the descriptor)": (
        "test_flash_forward", textwrap.dedent("""
        @triton.jit
        def flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, L, scale,
                                 D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                                 CAUSAL: tl.constexpr, ACC: tl.constexpr):
            tile, head = tl.program_id(0), tl.program_id(1)
            start = head * L * D
            q_desc = tl.make_tensor_descriptor(q_ptr + start, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_Q, D])
            k_desc = tl.make_tensor_descriptor(k_ptr + start, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_K, D])
            v_desc = tl.make_tensor_descriptor(v_ptr + start, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_K, D])
            rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
            q = q_desc.load([tile * BLOCK_Q, 0])               # rows past L come back as zeros
            m = tl.full((BLOCK_Q,), float("-inf"), dtype=ACC)
            s = tl.zeros((BLOCK_Q,), dtype=ACC)
            acc = tl.zeros((BLOCK_Q, D), dtype=ACC)
            end = L
            if CAUSAL:
                end = tl.minimum((tile + 1) * BLOCK_Q, L)
            for j0 in range(0, end, BLOCK_K):
                cols = j0 + tl.arange(0, BLOCK_K)
                k = k_desc.load([j0, 0])
                v = v_desc.load([j0, 0])
                scores = tl.dot(q, tl.trans(k)) * scale
                keep = cols[None, :] < L
                if CAUSAL:
                    keep = keep & (cols[None, :] <= rows[:, None])
                scores = tl.where(keep, scores, float("-inf"))
                m_new = tl.maximum(m, tl.max(scores, axis=1))
                p = tl.exp(scores - m_new[:, None])
                rescale = tl.exp(m - m_new)
                s = s * rescale + tl.sum(p, axis=1)
                acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
                m = m_new
            o_desc = tl.make_tensor_descriptor(o_ptr + start, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_Q, D])
            o_desc.store([tile * BLOCK_Q, 0], (acc / s[:, None]).to(o_desc.dtype))
            tl.store(lse_ptr + head * L + rows, m + tl.log(s), mask=rows < L)


        def flash_forward(q, k, v, causal=False, block_q=16, block_k=16):
            B, H, L, d = q.shape
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            o = torch.empty_like(q)
            lse = torch.empty(B, H, L, dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
                              device=q.device)
            triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device=q.device))
            flash_forward_kernel[(triton.cdiv(L, block_q), B * H)](q, k, v, o, lse, L, 1 / math.sqrt(d), D=d,
                                                                  BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
                                                                  ACC=accumulator(q.dtype))
            return o, lse
    """)),
    "backward with the scale folded into q and dq, dk scaled at the store": ("test_flash_backward", _variant(
        "flash_backward",
        ("dk += tl.dot(tl.trans(ds).to(q.dtype), q) * scale", "dk += tl.dot(tl.trans(ds).to(q.dtype), q)"),
        ("    tl.store(dk_ptr + start + cols[:, None] * D + dims[None, :], dk, mask=cols[:, None] < L)",
         "    tl.store(dk_ptr + start + cols[:, None] * D + dims[None, :], dk * scale, mask=cols[:, None] < L)"),
        ("        dq += tl.dot(ds.to(k.dtype), k) * scale", "        dq += tl.dot(ds.to(k.dtype), k)"),
        ("    tl.store(dq_ptr + start + rows[:, None] * D + dims[None, :], dq, mask=rows[:, None] < L)",
         "    tl.store(dq_ptr + start + rows[:, None] * D + dims[None, :], dq * scale, mask=rows[:, None] < L)"))),
    "backward with D summed in float64 and the dq kernel launched first": ("test_flash_backward", _variant(
        "flash_backward",
        ("delta = (grad_o * o).sum(-1)", "delta = torch.sum(grad_o.double() * o.double(), dim=3).to(q.dtype)"),
        ("    flash_backward_dkdv_kernel[(triton.cdiv(L, block_k), B * H)](q, k, v, grad_o, lse, delta, dk, dv, L, scale,\n"
         "                                                                 **shapes)\n"
         "    flash_backward_dq_kernel[(triton.cdiv(L, block_q), B * H)](q, k, v, grad_o, lse, delta, dq, L, scale, **shapes)\n",
         "    flash_backward_dq_kernel[(triton.cdiv(L, block_q), B * H)](q, k, v, grad_o, lse, delta, dq, L, scale, **shapes)\n"
         "    flash_backward_dkdv_kernel[(triton.cdiv(L, block_k), B * H)](q, k, v, grad_o, lse, delta, dk, dv, L, scale,\n"
         "                                                                 **shapes)\n"))),
    "backward with D by torch.einsum (the launcher's one computation, as the exercise allows)": (
        "test_flash_backward", _variant("flash_backward", ("delta = (grad_o * o).sum(-1)",
                                                           'delta = torch.einsum("...ld,...ld->...l", grad_o, o)'))),
    "Function saving o and lse as attributes-free tensors, apply with keywords resolved": ("test_flash_attention",
                                                                                           textwrap.dedent("""
        class FlashAttentionKernel(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=16, block_k=16):
                out, lse = flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
                ctx.save_for_backward(q, k, v, out, lse)
                ctx.settings = dict(causal=causal, block_q=block_q, block_k=block_k)
                return out

            @staticmethod
            def backward(ctx, grad_out):
                grads = flash_backward(*ctx.saved_tensors, grad_out, **ctx.settings)
                return (*grads, None, None, None)

        def flash_attention(q, k, v, causal=False, block_q=16, block_k=16):
            return FlashAttentionKernel.apply(q, k, v, causal, block_q, block_k)
    """)),
}
