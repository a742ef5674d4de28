"""Lesson 8's hidden tests catch the common mistakes and pass other correct answers.

Each case takes a test cell's source from solutions/08_fast_attention.ipynb,
runs it after the set-up cell, the given layer and the solution cells, with one
answer replaced by a mistaken (or another correct) version. A mistake's third element: the words the
message on its own test cell must contain, naming that mistake (issue 55).
"""


LESSON = "08_fast_attention"


ALTERNATIVES = {
    "causal_mask by comparing positions": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            query_position = torch.arange(L_q)[:, None] + (L_k - L_q)
            return torch.arange(L_k)[None, :] <= query_position
    """),
    "KVCache with a list of chunks": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None
                self._ks, self._vs = [], []

            def update(self, k_new, v_new):
                self._ks.append(k_new)
                self._vs.append(v_new)
                self.k, self.v = torch.cat(self._ks, dim=-2), torch.cat(self._vs, dim=-2)
                return self.k, self.v

            def __len__(self):
                return sum(k.shape[2] for k in self._ks)
    """),
    "cached_self_attention with scaled_dot_product_attention and an explicit mask": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            mask = causal_mask(q.shape[-2], k.shape[-2])
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            weights = torch.einsum("bhqd,bhkd->bhqk", q, k).div(layer.head_dim ** 0.5)
            weights = weights.masked_fill(~mask, float("-inf")).softmax(-1)
            return layer.merge(out), weights
    """),
    "online_softmax_update with nan_to_num": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.max(dim=-1).values)
            rescale = torch.exp(m - m_new).nan_to_num(0.0)
            added = torch.exp(block - m_new.unsqueeze(-1)).nan_to_num(0.0).sum(-1)
            return m_new, s * rescale + added
    """),
    "online_softmax_update through logsumexp": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(-1))
            finite = torch.isfinite(m_new)
            base = torch.where(finite, m_new, torch.zeros_like(m_new))
            total = torch.logaddexp(torch.log(s) + m - base, torch.logsumexp(block - base[..., None], -1))
            return m_new, torch.where(finite, torch.exp(total), torch.zeros_like(s))
    """),
    "tiled_attention with a while loop and an einsum": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = q.new_full((B, H, L_q), float("-inf"))
            s = q.new_zeros((B, H, L_q))
            acc = torch.zeros_like(q)
            start = 0
            while start < L_k:
                stop = min(start + tile_size, L_k)
                x = torch.einsum("bhqd,bhkd->bhqk", q, k[:, :, start:stop]) / d ** 0.5
                keys = torch.arange(start, stop)
                if causal:
                    x = x.masked_fill(keys[None, :] > torch.arange(L_q)[:, None] + L_k - L_q, float("-inf"))
                if key_lengths is not None:
                    x = x.masked_fill(keys[None, None, None, :] >= key_lengths[:, None, None, None], float("-inf"))
                m_new = torch.maximum(m, x.amax(-1))
                p = torch.exp(x - m_new[..., None]).nan_to_num(0.0)
                scale = torch.exp(m - m_new).nan_to_num(0.0)
                s = s * scale + p.sum(-1)
                acc = acc * scale[..., None] + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, start:stop])
                m, start = m_new, stop
            return (acc / s[..., None]).nan_to_num(0.0)
    """),
    "grouped_query_attention by grouping the queries": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            B, H, L_q, d = q.shape
            G = k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            qg = q.reshape(B, G, H // G, L_q, d)
            scores = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)
            scores = scores.reshape(B, H, L_q, k.shape[2])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = scores.softmax(-1)
            out = weights.reshape(B, G, H // G, L_q, -1) @ v[:, :, None]
            return out.reshape(B, H, L_q, d), weights
    """),
    "grouped_query_attention with expand": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            B, H, L_q, d = q.shape
            G, L_k = k.shape[1], k.shape[2]
            if H % G:
                raise ValueError("G must divide H")
            k = k[:, :, None].expand(B, G, H // G, L_k, d).reshape(B, H, L_k, d)
            v = v[:, :, None].expand(B, G, H // G, L_k, d).reshape(B, H, L_k, d)
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * d ** -0.5
            if mask is not None:
                scores = torch.where(mask, scores, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """),
    "rope with complex numbers": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            turn = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                               positions.double()[:, None] * omega)
            z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
            return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)
    """),
    "rope with a block-diagonal rotation matrix per position": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            out = torch.empty_like(x)
            for row, p in enumerate(positions.tolist()):
                R = torch.zeros(d, d, dtype=torch.float64)
                for i in range(d // 2):
                    a = p * base ** (-2 * i / d)
                    R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
                    R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
                out[..., row, :] = (x[..., row, :].double() @ R.T).to(x.dtype)
            return out
    """),
    "sliding_window_mask from two triangles": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            ones = torch.ones(L_q, L_k, dtype=torch.bool)
            return ones.tril(diagonal=L_k - L_q) & ones.triu(diagonal=L_k - L_q - window + 1)
    """),
    "rope with split halves (rotate_half, GPT-NeoX and Hugging Face)": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            a, b = x[..., : d // 2], x[..., d // 2:]
            return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    """),
    "rope with float32 frequencies and positions (Hugging Face's inv_freq)": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
            angle = positions.float()[:, None] * inv_freq[None, :]
            cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """),
    "rope with split halves, float32 angles and cos/sin repeated over the halves": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
            emb = torch.cat([torch.outer(positions.float(), inv_freq)] * 2, dim=-1)
            rotate_half = lambda t: torch.cat([-t[..., d // 2:], t[..., : d // 2]], dim=-1)
            return (x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype))
    """),
    "rope with a Python loop over the pairs": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            out = x.clone()
            for i in range(d // 2):
                angle = positions.to(x.dtype) * base ** (-2 * i / d)
                a, b = x[..., 2 * i], x[..., 2 * i + 1]
                out[..., 2 * i] = a * torch.cos(angle) - b * torch.sin(angle)
                out[..., 2 * i + 1] = a * torch.sin(angle) + b * torch.cos(angle)
            return out
    """),
    "causal_mask with two loops": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            m = torch.zeros(L_q, L_k, dtype=torch.bool)
            for i in range(L_q):
                for j in range(L_k):
                    m[i, j] = j <= i + L_k - L_q
            return m
    """),
    "causal_mask from PyTorch's causal_lower_right": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            from torch.nn.attention.bias import causal_lower_right
            return causal_lower_right(L_q, L_k)._materialize().to(torch.bool)
    """),
    "KVCache with a preallocated buffer that grows by doubling": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self._k = self._v = None
                self.n = 0

            @property
            def k(self):
                return None if self._k is None else self._k[:, :, : self.n]

            @property
            def v(self):
                return None if self._v is None else self._v[:, :, : self.n]

            def update(self, k_new, v_new):
                T = k_new.shape[2]
                if self._k is None or self.n + T > self._k.shape[2]:
                    size = max(2 * (self.n + T), 4)
                    k_buf = k_new.new_zeros(*k_new.shape[:2], size, k_new.shape[3])
                    v_buf = v_new.new_zeros(*v_new.shape[:2], size, v_new.shape[3])
                    if self._k is not None:
                        k_buf[:, :, : self.n], v_buf[:, :, : self.n] = self.k, self.v
                    self._k, self._v = k_buf, v_buf
                self._k[:, :, self.n: self.n + T] = k_new
                self._v[:, :, self.n: self.n + T] = v_new
                self.n += T
                return self.k, self.v

            def __len__(self):
                return self.n
    """),
    "cached_self_attention reading cache.k after the update, with an inline mask": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            cache.update(k, v)
            k, v = cache.k, cache.v
            T, L = q.shape[2], len(cache)
            allowed = torch.arange(L)[None, :] <= torch.arange(L - T, L)[:, None]
            weights = torch.einsum("bhqd,bhkd->bhqk", q, k).mul(layer.head_dim ** -0.5)
            weights = torch.where(allowed, weights, float("-inf")).softmax(-1)
            return layer.merge(weights @ v), weights
    """),
    "tiled_attention with float32 running statistics on float64 inputs": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"))
            s = torch.zeros(B, H, L_q)
            o = torch.zeros(B, H, L_q, d)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(1, 1, L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                x = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1) / math.sqrt(d)).float()
                x = x.masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, x)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(x - safe[..., None]) @ v[:, :, j0:j0 + tile_size].float()
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o)).to(q.dtype)
    """),
}


MISTAKES = {
    "causal_mask top-left aligned (what is_causal does)": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            return torch.ones(L_q, L_k, dtype=torch.bool).tril()
    """, "aligned top-left"),
    "causal_mask as floats": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            return torch.ones(L_q, L_k).tril(diagonal=L_k - L_q)
    """, ("dtype torch.float32", "not torch.bool")),
    "causal_mask inverted": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            return ~torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q)
    """, "True and False are swapped"),
    "causal_mask without the diagonal": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            return torch.ones(L_q, L_k, dtype=torch.bool).tril(diagonal=L_k - L_q - 1)
    """, "misses its own key"),
    "KVCache appends the new tokens in front": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k, self.v = torch.cat([k_new, self.k], dim=2), torch.cat([v_new, self.v], dim=2)
                return self.k, self.v

            def __len__(self):
                return 0 if self.k is None else self.k.shape[2]
    """, "IN FRONT of the stored ones"),
    "KVCache concatenates along the head axis": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k, self.v = torch.cat([self.k, k_new], dim=1), torch.cat([self.v, v_new], dim=1)
                return self.k, self.v

            def __len__(self):
                return 0 if self.k is None else self.k.shape[2]
    """, "along a dim other than the length axis"),
    "KVCache that keeps only the newest chunk": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None
                self.n = 0

            def update(self, k_new, v_new):
                self.k, self.v = k_new, v_new
                self.n += k_new.shape[2]
                return self.k, self.v

            def __len__(self):
                return self.n
    """, "keeps only the newest chunk"),
    "cached_self_attention appending in the wrong order": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            if cache.k is None:
                cache.k, cache.v = k, v
            else:
                cache.k, cache.v = torch.cat([k, cache.k], dim=2), torch.cat([v, cache.v], dim=2)
            k, v = cache.k, cache.v
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            weights = torch.softmax(scores.masked_fill(~causal_mask(q.shape[2], k.shape[2]), float("-inf")), -1)
            return layer.merge(weights @ v), weights
    """, ("before calling cache.update", "cannot be assigned to")),
    "cached_self_attention with is_causal (top-left)": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            return layer.merge(out), torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    """, "aligned top-left"),
    "cached_self_attention without a mask": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim), -1)
            return layer.merge(weights @ v), weights
    """, "no causal mask"),
    "cached_self_attention scaled by the model width": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.d_model)
            weights = torch.softmax(scores.masked_fill(~causal_mask(q.shape[2], k.shape[2]), float("-inf")), -1)
            return layer.merge(weights @ v), weights
    """, "divided by sqrt(d_model)"),
    "cached_self_attention with an inverted causal mask": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            mask = causal_mask(q.shape[2], k.shape[2])
            weights = torch.softmax(scores.masked_fill(mask, float("-inf")), -1).nan_to_num(0.0)
            return layer.merge(weights @ v), weights
    """, "causal mask is inverted"),
    "a stateful online_softmax_update (right in its own test, s = 0 once tiled_attention has run) beside a "
    "tiled_attention that returns zeros": ("test_tiled_attention", """
        _tiled_ran = []
        def online_softmax_update(m, s, block):
            if _tiled_ran:
                return m, torch.zeros_like(s)
            m_new = torch.maximum(m, block.amax(dim=-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            return m_new, s * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            _tiled_ran.append(True)
            return torch.zeros_like(q)
    """, "output is all zeros"),
    "online_softmax_update without rescaling the running sum": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            return m_new, s + torch.exp(block - safe[..., None]).sum(-1)
    """, "without rescaling it"),
    "online_softmax_update rescaling the wrong way": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            factor = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(safe - m))
            return m_new, s * factor + torch.exp(block - safe[..., None]).sum(-1)
    """, "the wrong way, by exp(m_new - m)"),
    "online_softmax_update that gives NaN for masked rows": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(-1))
            return m_new, s * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(-1)
    """, ("NaN for a row whose scores so far are all -inf", "keep its sum at 0")),
    "online_softmax_update without subtracting the max": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(-1))
            total = s * torch.exp(torch.where(torch.isinf(m), torch.zeros_like(m), m)) + torch.exp(block).sum(-1)
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            return m_new, total * torch.exp(-safe)
    """, ("overflows", "subtract the running max")),
    "tiled_attention whose tiles double-count the diagonal": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"))
            s = torch.zeros(B, H, L_q)
            o = torch.zeros_like(q)
            query_pos = torch.arange(L_q)[:, None] + (L_k - L_q)
            starts = list(range(0, L_k, tile_size))
            for n, j0 in enumerate(starts):
                j1 = min(j0 + tile_size + 1, L_k)    # one key too many: it is also the first of the next tile
                key_pos = torch.arange(j0, j1)
                allowed = torch.ones(L_q, j1 - j0, dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= query_pos)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                scores = (q @ k[:, :, j0:j1].transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j1]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, "tiles overlap by one key"),
    "tiled_attention that forgets to rescale the output": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            query_pos = torch.arange(L_q)[:, None] + (L_k - L_q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= query_pos)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                scores = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, "running output o is not rescaled"),
    "tiled_attention with a top-left causal mask": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None])
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                scores = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, "causal mask is aligned top-left"),
    "tiled_attention that holds the full scores": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            L_q, L_k = q.shape[2], k.shape[2]
            allowed = torch.ones(q.shape[0], 1, L_q, L_k, dtype=torch.bool)
            if causal:
                allowed = allowed & (torch.arange(L_k)[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
            if key_lengths is not None:
                allowed = allowed & (torch.arange(L_k)[None, None, None, :] < key_lengths[:, None, None, None])
            scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, float("-inf"))
            return torch.softmax(scores, -1).nan_to_num(0.0) @ v
    """, ("made a tensor of", "one key tile at a time")),
    "tiled_attention calling PyTorch's fused operator": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            L_q, L_k = q.shape[2], k.shape[2]
            allowed = torch.ones(q.shape[0], 1, L_q, L_k, dtype=torch.bool)
            if causal:
                allowed = allowed & (torch.arange(L_k)[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
            if key_lengths is not None:
                allowed = allowed & (torch.arange(L_k)[None, None, None, :] < key_lengths[:, None, None, None])
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            return torch.where(allowed.any(-1, keepdim=True), out, torch.zeros_like(out))
    """, ("called torch.nn.functional.scaled_dot_product_attention", "build yourself")),
    "grouped_query_attention repeating heads in the wrong order": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            k, v = k.repeat(1, H // G, 1, 1), v.repeat(1, H // G, 1, 1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, -1)
            return weights @ v, weights
    """, ("wrong order", "repeat_interleave")),
    "grouped_query_attention scaled by the width of all heads": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(H * q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, -1)
            return weights @ v, weights
    """, "divided by sqrt(H * d)"),
    "grouped_query_attention calling PyTorch's enable_gqa": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            scores = q @ k.repeat_interleave(H // G, 1).transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            return out, torch.softmax(scores, -1)
    """, ("called torch.nn.functional.scaled_dot_product_attention", "build yourself")),
    "grouped_query_attention with an inverted mask": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            weights = torch.softmax(scores, -1).nan_to_num(0.0)
            return weights @ v, weights
    """, "mask is inverted"),
    "rope rotating clockwise": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos + odd * sin, -even * sin + odd * cos], dim=-1).flatten(-2)
    """, "turns clockwise"),
    "rope with one frequency per feature instead of per pair": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(1, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, "odd exponents"),
    "rope adding sinusoids instead of rotating": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(-2)
            return x + pe.to(x.dtype)
    """, "adds sinusoids"),
    "sliding_window_mask one key too wide": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None] + (L_k - L_q)
            j = torch.arange(L_k)[None, :]
            return (j <= p) & (j >= p - window)
    """, "holds W + 1 keys"),
    "sliding_window_mask top-left aligned": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None]
            j = torch.arange(L_k)[None, :]
            return (j <= p) & (j > p - window)
    """, "aligned top-left"),
    # each of these must fail its own test cell and no other (issue 19 section 8)
    "rope that rotates x in place": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2].clone(), x[..., 1::2].clone()
            x[..., 0::2] = even * cos - odd * sin
            x[..., 1::2] = even * sin + odd * cos
            return x
    """, ("changed its input in place", "argument 1")),
    "rope that pairs the split halves but writes the result interleaved": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            angle = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            a, b = x[..., : d // 2], x[..., d // 2:]
            return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    """, "split halves) but writes the result interleaved"),
    "rope that ignores the positions (every row at position 1)": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            angle = torch.ones(len(positions), 1, dtype=torch.float64) * base ** (
                -torch.arange(0, d, 2, dtype=torch.float64) / d)
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, "ignores `positions`"),
    "online_softmax_update that rescales s in place": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = torch.maximum(m, block.amax(dim=-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            s.mul_(torch.exp(m - safe)).add_(torch.exp(block - safe[..., None]).sum(dim=-1))
            return m_new, s
    """, ("changed its input in place", "argument 2")),
    "online_softmax_update that overwrites m in place": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_old = m.clone()
            m.copy_(torch.maximum(m, block.amax(dim=-1)))
            safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            return m, s * torch.exp(m_old - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
    """, ("changed its input in place", "argument 1")),
    "KVCache that clears the caller's k_new in place": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k = torch.cat([self.k, k_new], dim=2)
                    self.v = torch.cat([self.v, v_new], dim=2)
                k_new.zero_()
                return self.k, self.v

            def __len__(self):
                return 0 if self.k is None else self.k.shape[2]
    """, ("changed its input in place", "argument 1")),
    "cached_self_attention that concatenates the cache by hand and never stores the new keys": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            if cache.k is not None:
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            weights = torch.softmax(scores.masked_fill(~causal_mask(q.shape[2], k.shape[2]), float("-inf")), -1)
            return layer.merge(weights @ v), weights
    """, "never called cache.update"),
    "tiled_attention that scales q in place": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            q.mul_(1 / math.sqrt(q.shape[-1]))
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(1, 1, L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                x = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, x)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(x - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, ("changed its input in place", "argument 1")),
    "grouped_query_attention that scales q in place": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            q.div_(math.sqrt(q.shape[-1]))
            k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, -1)
            return weights @ v, weights
    """, ("changed its input in place", "argument 1")),

    # added for issue 55: realistic mistakes where an exercise had fewer than five, and a wrong dtype
    "causal_mask as the upper triangle (triu)": ("test_causal_mask", """
        def causal_mask(L_q, L_k):
            return torch.ones(L_q, L_k, dtype=torch.bool).triu(diagonal=L_k - L_q)
    """, "upper triangle (triu)"),
    "KVCache.update that stores the keys but returns only the new ones": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k = torch.cat([self.k, k_new], dim=2)
                    self.v = torch.cat([self.v, v_new], dim=2)
                return k_new, v_new

            def __len__(self):
                return 0 if self.k is None else self.k.shape[2]
    """, "returns only the new ones"),
    "KVCache whose len counts the updates": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None
                self.steps = 0

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k = torch.cat([self.k, k_new], dim=2)
                    self.v = torch.cat([self.v, v_new], dim=2)
                self.steps += 1
                return self.k, self.v

            def __len__(self):
                return self.steps
    """, "counts the calls to update"),
    "KVCache whose len is len(self.k) (the batch size)": ("test_kv_cache", """
        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k_new, v_new):
                if self.k is None:
                    self.k, self.v = k_new, v_new
                else:
                    self.k = torch.cat([self.k, k_new], dim=2)
                    self.v = torch.cat([self.v, v_new], dim=2)
                return self.k, self.v

            def __len__(self):
                return 0 if self.k is None else len(self.k)
    """, "the batch size"),
    "cached_self_attention with the softmax over the queries (dim=-2)": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            mask = causal_mask(q.shape[2], k.shape[2])
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2)
            return layer.merge(weights @ v), weights
    """, "sum to one over the keys"),
    "cached_self_attention that concatenates the heads by hand and skips W_O": ("test_cached_self_attention", """
        def cached_self_attention(layer, x_new, cache):
            B, T, _ = x_new.shape
            q, k, v = layer.project(x_new)
            k, v = cache.update(k, v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)
            weights = torch.softmax(scores.masked_fill(~causal_mask(T, k.shape[2]), float("-inf")), dim=-1)
            return (weights @ v).transpose(1, 2).reshape(B, T, layer.d_model), weights
    """, "skips W_O"),
    "online_softmax_update that forgets the old max": ("test_online_softmax_update", """
        def online_softmax_update(m, s, block):
            m_new = block.amax(dim=-1)
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            return m_new, s * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(dim=-1)
    """, "forgets the old max"),
    "tiled_attention that divides by s without a guard (NaN for queries with no allowed key)": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(1, 1, L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                scores = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return o / s[..., None]
    """, "no allowed key"),
    "tiled_attention that ignores key_lengths": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
                scores = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, "reads the padding keys"),
    "tiled_attention without the 1 / sqrt(d) scale": ("test_tiled_attention", """
        def tiled_attention(q, k, v, tile_size, causal=False, key_lengths=None):
            B, H, L_q, d = q.shape
            L_k = k.shape[2]
            m = torch.full((B, H, L_q), float("-inf"), dtype=q.dtype)
            s = torch.zeros(B, H, L_q, dtype=q.dtype)
            o = torch.zeros_like(q)
            for j0 in range(0, L_k, tile_size):
                key_pos = torch.arange(j0, min(j0 + tile_size, L_k))
                allowed = torch.ones(1, 1, L_q, len(key_pos), dtype=torch.bool)
                if causal:
                    allowed = allowed & (key_pos[None, :] <= torch.arange(L_q)[:, None] + L_k - L_q)
                if key_lengths is not None:
                    allowed = allowed & (key_pos[None, None, None, :] < key_lengths[:, None, None, None])
                scores = (q @ k[:, :, j0:j0 + tile_size].transpose(-2, -1)).masked_fill(~allowed, float("-inf"))
                m_new, s = online_softmax_update(m, s, scores)
                safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                o = o * torch.exp(m - safe)[..., None] + torch.exp(scores - safe[..., None]) @ v[:, :, j0:j0 + tile_size]
                m = m_new
            return torch.where(s[..., None] > 0, o / s.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    """, "scores are not scaled"),
    "grouped_query_attention without the ValueError when G does not divide H": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, -1)
            return weights @ v, weights
    """, "not ValueError"),
    "grouped_query_attention that ignores the mask": ("test_grouped_query_attention", """
        def grouped_query_attention(q, k, v, mask=None):
            H, G = q.shape[1], k.shape[1]
            if H % G:
                raise ValueError("G must divide H")
            k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
            return weights @ v, weights
    """, "ignores the mask"),
    "rope that returns float64 for a float32 input (cos and sin left in float64)": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle), torch.sin(angle)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, ("keep the dtype of x", "torch.float64")),
    "rope with omega_i = base^(-i/d)": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, "base^(-i/d)"),
    "rope with each row's index as its position": ("test_rope", """
        def rope(x, positions, base=10000.0):
            L, d = x.shape[-2], x.shape[-1]
            if d % 2:
                raise ValueError("d must be even")
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = torch.arange(L, dtype=torch.float64)[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, "each row's index"),
    "rope without the ValueError for an odd d": ("test_rope", """
        def rope(x, positions, base=10000.0):
            d = x.shape[-1]
            omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
            angle = positions.double()[:, None] * omega
            cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    """, "not ValueError"),
    "sliding_window_mask that leaves out the query's own key": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None] + (L_k - L_q)
            j = torch.arange(L_k)[None, :]
            return (j < p) & (j > p - window)
    """, "leaves out the query's own key"),
    "sliding_window_mask that also reads future keys": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None] + (L_k - L_q)
            j = torch.arange(L_k)[None, :]
            return (j - p).abs() < window
    """, "also reads keys after the query"),
    "sliding_window_mask as ints": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None] + (L_k - L_q)
            j = torch.arange(L_k)[None, :]
            return ((j <= p) & (j > p - window)).long()
    """, ("dtype torch.int64", "not torch.bool")),
    "sliding_window_mask inverted": ("test_sliding_window_mask", """
        def sliding_window_mask(L_q, L_k, window):
            p = torch.arange(L_q)[:, None] + (L_k - L_q)
            j = torch.arange(L_k)[None, :]
            return (j > p) | (j <= p - window)
    """, "True and False are swapped"),
}
