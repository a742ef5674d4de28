"""Lesson 9's hidden tests catch the common mistakes and pass other correct answers.

Each case takes a test cell's source from solutions/09_flash_backward_and_batching.ipynb,
runs it after the set-up cells and the solution cells, with one answer replaced by a
mistaken (or another correct) version.
"""
import textwrap

LESSON = "09_flash_backward_and_batching"


ALTERNATIVES = {
    "flash_forward with FlashAttention-1's normalised running output, no skipped blocks, einsum":
        ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            outs, lses = [], []
            for i0 in range(0, L_q, block_q):
                q_i = q[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                m = q.new_full((B, H, n, 1), float("-inf"))
                s = q.new_zeros((B, H, n, 1))
                o = torch.zeros_like(q_i)
                rows = torch.arange(i0, i0 + n)[:, None] + L_k - L_q
                for j0 in range(0, L_k, block_k):
                    x = torch.einsum("bhqd,bhkd->bhqk", q_i, k[:, :, j0:j0 + block_k]) * d ** -0.5
                    if causal:
                        cols = torch.arange(j0, j0 + x.shape[-1])[None, :]
                        x = torch.where(cols <= rows, x, torch.full_like(x, float("-inf")))
                    m_new = torch.maximum(m, x.amax(-1, keepdim=True))
                    p = torch.exp(x - m_new).nan_to_num(0.0)
                    s_new = s * torch.exp(m - m_new).nan_to_num(0.0) + p.sum(-1, keepdim=True)
                    o = (o * (s * torch.exp(m - m_new).nan_to_num(0.0))
                         + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, j0:j0 + block_k])) / s_new.clamp_min(1e-30)
                    m, s = m_new, s_new
                outs.append(o)
                lses.append((m + torch.log(s)).squeeze(-1))
            return torch.cat(outs, dim=2), torch.cat(lses, dim=2)
    """),
    "flash_forward with a running log-sum-exp (logaddexp) and float32 statistics": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            o = torch.zeros_like(q)
            lse = torch.zeros(B, H, L_q, dtype=q.dtype)
            for i0 in range(0, L_q, block_q):
                q_i = q[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                run = torch.full((B, H, n), float("-inf"))
                acc = torch.zeros_like(q_i)
                ref = None
                for j0 in range(0, L_k, block_k):
                    x = (q_i @ k[:, :, j0:j0 + block_k].transpose(-2, -1)) / math.sqrt(d)
                    if causal:
                        keep = torch.ones(n, x.shape[-1], dtype=torch.bool).tril(i0 + L_k - L_q - j0)
                        x = x.masked_fill(~keep, float("-inf"))
                    block_lse = torch.logsumexp(x, dim=-1)
                    new_run = torch.logaddexp(run.to(x.dtype), block_lse)
                    w = torch.exp(x - new_run[..., None])
                    acc = acc * torch.exp(run.to(x.dtype) - new_run)[..., None].nan_to_num(0.0) + w @ v[:, :, j0:j0 + block_k]
                    run = new_run
                o[:, :, i0:i0 + n] = acc
                lse[:, :, i0:i0 + n] = run.to(q.dtype)
            return o, lse
    """),
    "flash_backward with the queries outside and einsum": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
            for i0 in range(0, L_q, block_q):
                q_i, do_i, o_i = q[:, :, i0:i0 + block_q], grad_o[:, :, i0:i0 + block_q], o[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                D_i = torch.einsum("bhqd,bhqd->bhq", do_i, o_i)[..., None]
                for j0 in range(0, L_k, block_k):
                    k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
                    x = torch.einsum("bhqd,bhkd->bhqk", q_i, k_j) / math.sqrt(d)
                    if causal:
                        keys = torch.arange(j0, j0 + k_j.shape[2])
                        x = x.masked_fill(keys[None, :] > torch.arange(i0, i0 + n)[:, None] + L_k - L_q, float("-inf"))
                    p = (x - lse[:, :, i0:i0 + n, None]).exp()
                    dv[:, :, j0:j0 + block_k] += torch.einsum("bhqk,bhqd->bhkd", p, do_i)
                    ds = p * (torch.einsum("bhqd,bhkd->bhqk", do_i, v_j) - D_i) / math.sqrt(d)
                    dq[:, :, i0:i0 + n] += torch.einsum("bhqk,bhkd->bhqd", ds, k_j)
                    dk[:, :, j0:j0 + block_k] += torch.einsum("bhqk,bhqd->bhkd", ds, q_i)
            return dq, dk, dv
    """),
    "FlashAttention that checks needs_input_grad, flash_attention with keyword arguments": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                out, lse = flash_forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
                ctx.save_for_backward(q, k, v, out, lse)
                ctx.options = dict(causal=causal, block_q=block_q, block_k=block_k)
                return out

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, out, lse = ctx.saved_tensors
                grads = flash_backward(q, k, v, out, lse, grad_o.contiguous(), **ctx.options)
                return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad)) + (None,) * 3


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """),
    "left_pad with pad_sequence on flipped prompts": ("test_left_pad", """
        def left_pad(prompts, pad_id=0):
            from torch.nn.utils.rnn import pad_sequence
            ids = pad_sequence([p.flip(0) for p in prompts], batch_first=True, padding_value=pad_id).flip(1)
            mask = pad_sequence([torch.ones(len(p), dtype=torch.bool) for p in prompts], batch_first=True).flip(1)
            positions = (mask.long().cumsum(1) - 1).clamp_min(0)
            return ids, positions, mask
    """),
    "StaticKVCache with narrow().copy_()": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros((batch, heads, max_len, head_dim), dtype=dtype, device=device)
                self.v = torch.zeros_like(self.k)
                self.length = 0

            def write(self, k_new, v_new):
                T = k_new.size(2)
                if self.length + T > self.k.size(2):
                    raise ValueError(f"only {self.k.size(2) - self.length} positions left")
                self.k.narrow(2, self.length, T).copy_(k_new)
                self.v.narrow(2, self.length, T).copy_(v_new)
                self.length += T
                return self.k.narrow(2, 0, self.length), self.v.narrow(2, 0, self.length)

            def __len__(self):
                return self.length
    """),
    "decode_batch with a growing key mask and positions from its cumulative sum": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L + new_tokens, model.head_dim) for _ in model.blocks]
            logits = model(ids, positions, mask, caches)
            out = []
            for _ in range(new_tokens):
                nxt = logits[:, -1:].argmax(-1)
                out.append(nxt)
                mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.bool)], dim=1)
                if len(out) < new_tokens:
                    logits = model(nxt, mask.long().cumsum(1)[:, -1:] - 1, mask, caches)
            return torch.cat(out, dim=1)
    """),
}


MISTAKES = {
    "flash_forward tiles only the keys (all queries at once)": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            acc = torch.zeros_like(q)
            query_pos = torch.arange(L_q)[:, None] + (L_k - L_q)
            for j0 in range(0, L_k, block_k):
                k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
                scores = q @ k_j.transpose(-2, -1) / math.sqrt(d)
                if causal:
                    key_pos = torch.arange(j0, j0 + k_j.shape[2])
                    scores = scores.masked_fill(key_pos[None, :] > query_pos, float("-inf"))
                m_new = torch.maximum(m, scores.amax(-1))
                p = torch.exp(scores - m_new[..., None])
                rescale = torch.exp(m - m_new)
                s = s * rescale + p.sum(-1)
                acc = acc * rescale[..., None] + p @ v_j
                m = m_new
            return acc / s[..., None], m + torch.log(s)
    """, "cut the queries into blocks"),
    "flash_forward returns log(s) without the running max": ("test_flash_forward", """
        _right_forward = flash_forward
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            o, lse = _right_forward(q, k, v, causal, block_q, block_k)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            return o, lse - scores.amax(-1)
    """, "without the running max"),
    "flash_forward's log-sum-exp of the unscaled scores": ("test_flash_forward", """
        _right_forward = flash_forward
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            o, _ = _right_forward(q, k, v, causal, block_q, block_k)
            _, lse = _right_forward(q * math.sqrt(q.shape[-1]), k, v, causal, block_q, block_k)
            return o, lse
    """, "unscaled scores"),
    "flash_forward with the causal mask upper-left (is_causal's corner)": ("test_flash_forward", """
        _right_forward = flash_forward
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            if not causal:
                return _right_forward(q, k, v, False, block_q, block_k)
            L_q, L_k = q.shape[2], k.shape[2]
            # queries placed at positions 0..L_q-1: a padded copy of q would sit at the end
            o, lse = _right_forward(torch.cat([q, q.new_zeros(q.shape[0], q.shape[1], L_k - L_q, q.shape[3])], 2),
                                    k, v, True, block_q, block_k)
            return o[:, :, :L_q], lse[:, :, :L_q]
    """, "aligned upper-left"),
    "flash_forward skips the key block that starts at the last query's position": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            o = torch.empty_like(q)
            lse = torch.empty(B, H, L_q, dtype=q.dtype)
            for i0 in range(0, L_q, block_q):
                q_i = q[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                m = torch.full((B, H, n), float("-inf"), dtype=q.dtype)
                s = torch.zeros(B, H, n, dtype=q.dtype)
                acc = torch.zeros_like(q_i)
                query_pos = torch.arange(i0, i0 + n)[:, None] + (L_k - L_q)
                for j0 in range(0, L_k, block_k):
                    if causal and j0 >= i0 + n - 1 + (L_k - L_q):
                        break
                    k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
                    scores = q_i @ k_j.transpose(-2, -1) / math.sqrt(d)
                    if causal:
                        key_pos = torch.arange(j0, j0 + k_j.shape[2])
                        scores = scores.masked_fill(key_pos[None, :] > query_pos, float("-inf"))
                    m_new = torch.maximum(m, scores.amax(-1))
                    p = torch.exp(scores - m_new[..., None]).nan_to_num(0.0)
                    rescale = torch.exp(m - m_new).nan_to_num(0.0)
                    s = s * rescale + p.sum(-1)
                    acc = acc * rescale[..., None] + p @ v_j
                    m = m_new
                o[:, :, i0:i0 + n] = acc / s[..., None]
                lse[:, :, i0:i0 + n] = m + torch.log(s)
            return o, lse
    """, "skips the key block"),
    "flash_forward through PyTorch's fused operator (forbidden)": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            L_q, L_k = q.shape[2], k.shape[2]
            mask = torch.ones(L_q, L_k, dtype=torch.bool, device=q.device).tril(L_k - L_q) if causal else None
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.logsumexp(scores, dim=-1)
    """, "called torch.nn.functional.scaled_dot_product_attention"),
    "flash_forward leaves the last partial block of queries unfilled (torch.empty)": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            scale = 1 / math.sqrt(d)
            o = torch.empty_like(q)
            lse = torch.empty(B, H, L_q, dtype=q.dtype, device=q.device)
            for i0 in range(0, L_q - block_q + 1, block_q):  # the last partial block is never filled
                q_i = q[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                m = torch.full((B, H, n), float("-inf"), dtype=q.dtype, device=q.device)
                s = torch.zeros(B, H, n, dtype=q.dtype, device=q.device)
                acc = torch.zeros_like(q_i)
                query_pos = torch.arange(i0, i0 + n, device=q.device)[:, None] + (L_k - L_q)      # (n, 1)
                for j0 in range(0, L_k, block_k):
                    if causal and j0 > i0 + n - 1 + (L_k - L_q):
                        break                                    # every later key block is in this block's future
                    k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
                    scores = q_i @ k_j.transpose(-2, -1) * scale                                  # (B, H, n, tile)
                    if causal:
                        key_pos = torch.arange(j0, j0 + k_j.shape[2], device=q.device)
                        scores = scores.masked_fill(key_pos[None, :] > query_pos, float("-inf"))
                    m_new = torch.maximum(m, scores.amax(dim=-1))
                    p = torch.exp(scores - m_new[..., None])
                    rescale = torch.exp(m - m_new)
                    s = s * rescale + p.sum(dim=-1)
                    acc = acc * rescale[..., None] + p @ v_j
                    m = m_new
                o[:, :, i0:i0 + n] = acc / s[..., None]
                lse[:, :, i0:i0 + n] = m + torch.log(s)
            return o, lse
    """, "last, shorter block of queries"),
    "flash_forward forgets to rescale the running output": ("test_flash_forward", """
        def flash_forward(q, k, v, causal=False, block_q=64, block_k=64):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            o = torch.empty_like(q)
            lse = torch.empty(B, H, L_q, dtype=q.dtype)
            for i0 in range(0, L_q, block_q):
                q_i = q[:, :, i0:i0 + block_q]
                n = q_i.shape[2]
                m = torch.full((B, H, n), float("-inf"), dtype=q.dtype)
                s = torch.zeros(B, H, n, dtype=q.dtype)
                acc = torch.zeros_like(q_i)
                query_pos = torch.arange(i0, i0 + n)[:, None] + (L_k - L_q)
                for j0 in range(0, L_k, block_k):
                    k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
                    scores = q_i @ k_j.transpose(-2, -1) / math.sqrt(d)
                    if causal:
                        key_pos = torch.arange(j0, j0 + k_j.shape[2])
                        scores = scores.masked_fill(key_pos[None, :] > query_pos, float("-inf"))
                    m_new = torch.maximum(m, scores.amax(-1))
                    p = torch.exp(scores - m_new[..., None])
                    rescale = torch.exp(m - m_new)
                    s = s * rescale + p.sum(-1)
                    acc = acc + p @ v_j
                    m = m_new
                o[:, :, i0:i0 + n] = acc / s[..., None]
                lse[:, :, i0:i0 + n] = m + torch.log(s)
            return o, lse
    """, "acc is not rescaled"),
    "flash_backward forgets the log-sum-exp shift (p = exp(scores))": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, weights="exp")
    """, "without the saved log-sum-exp"),
    "flash_backward normalises each tile on its own (softmax of the tile)": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, weights="tile softmax")
    """, "normalised on its own"),
    "flash_backward takes D from grad_o and v instead of grad_o and o": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, D="grad_o * v")
    """, "D is computed from grad_o and v"),
    "flash_backward takes D from one tile's p and dp": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, D="tile")
    """, "one tile's p and dp"),
    "flash_backward with the causal mask upper-left while the forward's is lower-right": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, corner="upper-left")
    """, "aligned upper-left"),
    "flash_backward forgets the scale in dq and dk": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            return _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, scale_grads=False)
    """, "miss the 1/sqrt(d)"),
    "flash_backward materialises the full weights": ("test_flash_backward", """
        def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
            L_q, L_k = q.shape[2], k.shape[2]
            return _backward_variant(q, k, v, o, lse, grad_o, causal, L_q, L_k)
    """, "one (block_q, block_k) tile at a time"),
    "FlashAttention.backward returns three gradients for six inputs": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                o, lse = flash_forward(q, k, v, causal, block_q, block_k)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.causal, ctx.blocks = causal, (block_q, block_k)
                return o

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, o, lse = ctx.saved_tensors
                return flash_backward(q, k, v, o, lse, grad_o, ctx.causal, *ctx.blocks)


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, "fewer gradients than forward has inputs"),
    "FlashAttention.backward drops the causal mask": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                o, lse = flash_forward(q, k, v, causal, block_q, block_k)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.blocks = (block_q, block_k)
                return o

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, o, lse = ctx.saved_tensors
                return (*flash_backward(q, k, v, o, lse, grad_o, False, *ctx.blocks), None, None, None)


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, "without the causal mask"),
    "flash_attention lets autograd differentiate the tiled loops (saves every tile)": ("test_flash_attention", """
        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return flash_forward(q, k, v, causal, block_q, block_k)[0]
    """, "autograd recorded your tiled loops"),
    "FlashAttention saves the full weights and differentiates them": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                L_q, L_k = q.shape[2], k.shape[2]
                scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
                if causal:
                    scores = scores.masked_fill(~torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q), float("-inf"))
                p = torch.softmax(scores, -1)
                ctx.save_for_backward(q, k, v, p)
                return p @ v

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, p = ctx.saved_tensors
                dp = grad_o @ v.transpose(-2, -1)
                ds = p * (dp - (p * dp).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
                return ds @ k, ds.transpose(-2, -1) @ q, p.transpose(-2, -1) @ grad_o, None, None, None


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, "a tensor as large as the (L, L) scores"),
    "FlashAttention.forward returns (o, lse), so flash_attention returns a pair": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                o, lse = flash_forward(q, k, v, causal, block_q, block_k)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
                return o, lse

            @staticmethod
            def backward(ctx, grad_o, grad_lse):
                q, k, v, o, lse = ctx.saved_tensors
                dq, dk, dv = flash_backward(q, k, v, o, lse, grad_o, ctx.causal, ctx.block_q, ctx.block_k)
                return dq, dk, dv, None, None, None


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, "returns a tuple"),
    "FlashAttention.backward returns dk, dq, dv (the first two swapped)": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                o, lse = flash_forward(q, k, v, causal, block_q, block_k)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
                return o

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, o, lse = ctx.saved_tensors
                dq, dk, dv = flash_backward(q, k, v, o, lse, grad_o, ctx.causal, ctx.block_q, ctx.block_k)
                return dk, dq, dv, None, None, None


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, "dq holds the gradient of k"),
    "FlashAttention.forward through PyTorch's fused operator (forbidden)": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                _, lse = flash_forward(q, k, v, causal, block_q, block_k)
                L_q, L_k = q.shape[2], k.shape[2]
                mask = torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q) if causal else None
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
                return o

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v, o, lse = ctx.saved_tensors
                dq, dk, dv = flash_backward(q, k, v, o, lse, grad_o, ctx.causal, ctx.block_q, ctx.block_k)
                return dq, dk, dv, None, None, None


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, ("FlashAttention.forward", "called torch.nn.functional.scaled_dot_product_attention")),
    "FlashAttention.backward differentiates PyTorch's fused operator (forbidden)": ("test_flash_attention", """
        class FlashAttention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64):
                o, lse = flash_forward(q, k, v, causal, block_q, block_k)
                ctx.save_for_backward(q, k, v)
                ctx.causal = causal
                return o

            @staticmethod
            def backward(ctx, grad_o):
                q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
                L_q, L_k = q.shape[2], k.shape[2]
                mask = torch.ones(L_q, L_k, dtype=torch.bool).tril(L_k - L_q) if ctx.causal else None
                with torch.enable_grad():
                    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                    dq, dk, dv = torch.autograd.grad(o, (q, k, v), grad_o)
                return dq, dk, dv, None, None, None


        def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
            return FlashAttention.apply(q, k, v, causal, block_q, block_k)
    """, ("FlashAttention.backward", "called torch.nn.functional.scaled_dot_product_attention")),
    "left_pad counts positions from the padding (column numbers)": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, key_mask = _right_left_pad(prompts, pad_id)
            return ids, torch.arange(ids.shape[1]).expand_as(ids).clone(), key_mask
    """, "positions are column numbers"),
    "left_pad pads on the right": ("test_left_pad", """
        def left_pad(prompts, pad_id=0):
            L = max(len(p) for p in prompts)
            ids = torch.full((len(prompts), L), pad_id, dtype=torch.long)
            positions = torch.zeros(len(prompts), L, dtype=torch.long)
            mask = torch.zeros(len(prompts), L, dtype=torch.bool)
            for b, p in enumerate(prompts):
                ids[b, :len(p)] = p
                positions[b, :len(p)] = torch.arange(len(p))
                mask[b, :len(p)] = True
            return ids, positions, mask
    """, "padded on the right"),
    "left_pad counts positions from 1": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, key_mask = _right_left_pad(prompts, pad_id)
            return ids, positions + key_mask.long(), key_mask
    """, "positions count from 1"),
    "left_pad pads with 0 whatever pad_id": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, key_mask = _right_left_pad(prompts, 0)
            return ids, positions, key_mask
    """, "the padding is 0, not pad_id"),
    "left_pad continues the positions to the left, negative on the padding": ("test_left_pad", """
        def left_pad(prompts, pad_id=0):
            L = max(len(p) for p in prompts)
            ids = torch.stack([torch.cat([torch.full((L - len(p),), pad_id, dtype=torch.long), p]) for p in prompts])
            positions = torch.stack([torch.arange(L) - (L - len(p)) for p in prompts])
            key_mask = torch.stack([torch.arange(L) >= L - len(p) for p in prompts])
            return ids, positions, key_mask
    """, "positions are negative"),
    "left_pad returns the mask of the padding (True on padding)": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, key_mask = _right_left_pad(prompts, pad_id)
            return ids, positions, ~key_mask
    """, "key mask is inverted"),
    "left_pad returns the key mask as 0/1 integers": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, key_mask = _right_left_pad(prompts, pad_id)
            return ids, positions, key_mask.long()
    """, "key_mask should be torch.bool"),
    "StaticKVCache grown with torch.cat": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.max_len = max_len
                self.k = torch.zeros(batch, heads, 0, head_dim, dtype=dtype, device=device)
                self.v = torch.zeros(batch, heads, 0, head_dim, dtype=dtype, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                if self.length + k_new.shape[2] > self.max_len:
                    raise ValueError("full")
                self.k = torch.cat([self.k, k_new], dim=2)
                self.v = torch.cat([self.v, v_new], dim=2)
                self.length = self.k.shape[2]
                return self.k, self.v

            def __len__(self):
                return self.length
    """, "starts with 0 positions"),
    "StaticKVCache copies its buffers at every write": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.v = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                end = self.length + k_new.shape[2]
                if end > self.k.shape[2]:
                    raise ValueError("full")
                self.k, self.v = self.k.clone(), self.v.clone()
                self.k[:, :, self.length:end] = k_new
                self.v[:, :, self.length:end] = v_new
                self.length = end
                return self.k[:, :, :end], self.v[:, :, :end]

            def __len__(self):
                return self.length
    """, "write the new keys into the existing buffers"),
    "StaticKVCache never raises when full": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.v = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                end = self.length + k_new.shape[2]
                self.k[:, :, self.length:end] = k_new[:, :, :self.k.shape[2] - self.length]
                self.v[:, :, self.length:end] = v_new[:, :, :self.k.shape[2] - self.length]
                self.length = min(end, self.k.shape[2])
                return self.k[:, :, :self.length], self.v[:, :, :self.length]

            def __len__(self):
                return self.length
    """, "without raising ValueError"),
    "StaticKVCache refuses a write that fills it exactly (>= for >)": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.v = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                end = self.length + k_new.shape[2]
                if end >= self.k.shape[2]:
                    raise ValueError(f"only {self.k.shape[2] - self.length} positions left")
                self.k[:, :, self.length:end] = k_new
                self.v[:, :, self.length:end] = v_new
                self.length = end
                return self.k[:, :, :end], self.v[:, :, :end]

            def __len__(self):
                return self.length
    """, "raise only when length + T > max_len"),
    "StaticKVCache.write returns the whole buffers": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.v = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                end = self.length + k_new.shape[2]
                if end > self.k.shape[2]:
                    raise ValueError("full")
                self.k[:, :, self.length:end] = k_new
                self.v[:, :, self.length:end] = v_new
                self.length = end
                return self.k, self.v

            def __len__(self):
                return self.length
    """, "returns the whole buffers"),
    "StaticKVCache allocates float32 buffers whatever dtype is asked for": ("test_static_kv_cache", """
        class StaticKVCache:
            def __init__(self, batch, heads, max_len, head_dim, dtype=torch.float32, device="cpu"):
                self.k = torch.zeros(batch, heads, max_len, head_dim, device=device)
                self.v = torch.zeros(batch, heads, max_len, head_dim, device=device)
                self.length = 0

            def write(self, k_new, v_new):
                end = self.length + k_new.shape[2]
                if end > self.k.shape[2]:
                    raise ValueError("full")
                self.k[:, :, self.length:end] = k_new
                self.v[:, :, self.length:end] = v_new
                self.length = end
                return self.k[:, :, :end], self.v[:, :, :end]

            def __len__(self):
                return self.length
    """, "allocate the buffers with the dtype given"),
    "left_pad builds the key mask from ids != pad_id": ("test_left_pad", """
        _right_left_pad = left_pad
        def left_pad(prompts, pad_id=0):
            ids, positions, _ = _right_left_pad(prompts, pad_id)
            return ids, positions, ids != pad_id
    """, "built from ids != pad_id"),
    "decode_batch puts generated tokens at column numbers (positions from the padding)": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, key_mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L + new_tokens, model.head_dim) for _ in model.blocks]
            mask = torch.ones(B, L + new_tokens, dtype=torch.bool)
            mask[:, :L] = key_mask
            generated = [model(ids, positions, mask, caches)[:, -1].argmax(-1)]
            for t in range(1, new_tokens):
                position = torch.full((B, 1), L + t - 1)
                generated.append(model(generated[-1][:, None], position, mask, caches)[:, -1].argmax(-1))
            return torch.stack(generated, dim=1)
    """, "put at column numbers"),
    "decode_batch does not mask the padding": ("test_decode_batch", """
        _right_decode_batch = decode_batch
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            def unmasked(prompts, pad_id=0):
                ids, positions, key_mask = pad(prompts, pad_id)
                return ids, positions, torch.ones_like(key_mask)
            return _right_decode_batch(model, prompts, new_tokens, pad=unmasked, make_cache=make_cache, pad_id=pad_id)
    """, "padding is not masked"),
    "decode_batch masks the generated tokens' keys": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, key_mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L + new_tokens, model.head_dim) for _ in model.blocks]
            mask = torch.zeros(B, L + new_tokens, dtype=torch.bool)
            mask[:, :L] = key_mask
            lengths = key_mask.sum(1)
            generated = [model(ids, positions, mask, caches)[:, -1].argmax(-1)]
            for t in range(1, new_tokens):
                generated.append(model(generated[-1][:, None], (lengths + t - 1)[:, None], mask, caches)[:, -1].argmax(-1))
            return torch.stack(generated, dim=1)
    """, "generated tokens' keys are masked"),
    "decode_batch reads each row's first token at its prompt length, as if right-padded": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, key_mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L + new_tokens, model.head_dim) for _ in model.blocks]
            mask = torch.ones(B, L + new_tokens, dtype=torch.bool)
            mask[:, :L] = key_mask
            lengths = key_mask.sum(1)
            logits = model(ids, positions, mask, caches)
            generated = [logits[torch.arange(B), lengths - 1].argmax(-1)]
            for t in range(1, new_tokens):
                generated.append(model(generated[-1][:, None], (lengths + t - 1)[:, None], mask, caches)[:, -1].argmax(-1))
            return torch.stack(generated, dim=1)
    """, "as if right-padded"),
    "decode_batch runs the whole sequence through the model at every step": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, key_mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L + new_tokens, model.head_dim) for _ in model.blocks]
            mask = torch.ones(B, L + new_tokens, dtype=torch.bool)
            mask[:, :L] = key_mask
            generated = []
            for t in range(new_tokens):
                generated.append(model(ids, positions, mask, caches)[:, -1].argmax(-1))
                ids = torch.cat([ids, generated[-1][:, None]], dim=1)
                positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
            return torch.stack(generated, dim=1)
    """, "newest token of every row only"),
    "decode_batch allocates caches of the prompt's length only": ("test_decode_batch", """
        @torch.no_grad()
        def decode_batch(model, prompts, new_tokens, pad=left_pad, make_cache=StaticKVCache, pad_id=0):
            ids, positions, key_mask = pad(prompts, pad_id)
            B, L = ids.shape
            caches = [make_cache(B, model.n_heads, L, model.head_dim) for _ in model.blocks]
            mask = torch.ones(B, L + new_tokens, dtype=torch.bool)
            mask[:, :L] = key_mask
            lengths = key_mask.sum(1)
            generated = [model(ids, positions, mask, caches)[:, -1].argmax(-1)]
            for t in range(1, new_tokens):
                generated.append(model(generated[-1][:, None], (lengths + t - 1)[:, None], mask, caches)[:, -1].argmax(-1))
            return torch.stack(generated, dim=1)
    """, "wrote past the cache"),
}


# one backward pass with a chosen mistake, shared by the flash_backward cases above
_BACKWARD_VARIANT = '''
def _backward_variant(q, k, v, o, lse, grad_o, causal, block_q, block_k, weights="lse", D="grad_o * o",
                      corner="lower-right", scale_grads=True):
    B, H, L_q, d = q.shape
    L_k = k.shape[2]
    scale = 1 / math.sqrt(d)
    D_all = (grad_o * o).sum(-1) if D == "grad_o * o" else (grad_o * v).sum(-1) if D == "grad_o * v" else None
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    offset = L_k - L_q if corner == "lower-right" else 0
    for j0 in range(0, L_k, block_k):
        k_j, v_j = k[:, :, j0:j0 + block_k], v[:, :, j0:j0 + block_k]
        key_pos = torch.arange(j0, j0 + k_j.shape[2])
        for i0 in range(0, L_q, block_q):
            q_i, do_i = q[:, :, i0:i0 + block_q], grad_o[:, :, i0:i0 + block_q]
            n = q_i.shape[2]
            scores = q_i @ k_j.transpose(-2, -1) * scale
            if causal:
                scores = scores.masked_fill(key_pos[None, :] > torch.arange(i0, i0 + n)[:, None] + offset, float("-inf"))
            if weights == "lse":
                p = torch.exp(scores - lse[:, :, i0:i0 + n, None])
            elif weights == "exp":
                p = torch.exp(scores)
            else:
                p = torch.softmax(scores, -1).nan_to_num(0.0)
            dp = do_i @ v_j.transpose(-2, -1)
            D_i = (p * dp).sum(-1) if D_all is None else D_all[:, :, i0:i0 + n]
            ds = p * (dp - D_i[..., None])
            g = scale if scale_grads else 1.0
            dv[:, :, j0:j0 + block_k] += p.transpose(-2, -1) @ do_i
            dq[:, :, i0:i0 + n] += ds @ k_j * g
            dk[:, :, j0:j0 + block_k] += ds.transpose(-2, -1) @ q_i * g
    return dq, dk, dv
'''
MISTAKES = {name: (test_id, _BACKWARD_VARIANT + textwrap.dedent(code) if "_backward_variant(" in code else code, *words)
            for name, (test_id, code, *words) in MISTAKES.items()}
