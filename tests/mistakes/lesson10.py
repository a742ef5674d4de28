"""Lesson 10's hidden tests catch the common mistakes and pass other correct answers.

Each case takes a test cell's source from solutions/10_linear_attention.ipynb,
runs it after the set-up cell (which gives elu_plus_one) and the solution cells,
with one answer replaced by a mistaken (or another correct) version.
"""


LESSON = "10_linear_attention"


ALTERNATIVES = {
    "linear_attention_parallel with cumulative sums": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)
            z = torch.cumsum(fk, dim=-2)
            return torch.einsum("...lk,...lkv->...lv", fq, S) / (fq * z).sum(-1, keepdim=True)
    """),
    "linear_attention_parallel with torch.where, einsum and an epsilon": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = torch.einsum("...td,...jd->...tj", F.elu(q) + 1, F.elu(k) + 1)
            keep = torch.arange(L)[None, :] <= torch.arange(L)[:, None]
            a = torch.where(keep, a, torch.zeros_like(a))
            return torch.einsum("...tj,...jv->...tv", a, v) / (a.sum(-1)[..., None] + 1e-6)
    """),
    "linear_attention_parallel as a loop in float64": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            fq, fk, vd = elu_plus_one(q.double()), elu_plus_one(k.double()), v.double()
            rows = []
            for t in range(q.shape[-2]):
                w = (fq[..., t:t + 1, :] * fk[..., :t + 1, :]).sum(-1)          # (..., t+1)
                rows.append((w[..., None] * vd[..., :t + 1, :]).sum(-2) / w.sum(-1, keepdim=True))
            return torch.stack(rows, dim=-2).to(q.dtype)
    """),
    "linear_attention_step with einsum and matmul": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fk = elu_plus_one(k_t)
            S_new = S + torch.einsum("...k,...v->...kv", fk, v_t)
            z_new = z + fk
            fq = elu_plus_one(q_t).unsqueeze(-2)
            return (fq @ S_new).squeeze(-2) / (fq @ z_new.unsqueeze(-1)).squeeze(-1), S_new, z_new
    """),
    "linear_attention_step with the read split into old state plus new token": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            own = (fq * fk).sum(-1, keepdim=True)
            num = torch.einsum("...k,...kv->...v", fq, S) + own * v_t
            den = (fq * z).sum(-1, keepdim=True) + own
            return num / den, S + fk.unsqueeze(-1) * v_t.unsqueeze(-2), z + fk
    """),
    "linear_attention_chunked with split and einsum": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = F.elu(q) + 1, F.elu(k) + 1
            S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = torch.zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for qc, kc, vc in zip(fq.split(chunk_size, -2), fk.split(chunk_size, -2), v.split(chunk_size, -2)):
                C = qc.shape[-2]
                a = torch.einsum("...td,...jd->...tj", qc, kc) * torch.tril(torch.ones(C, C))
                num = torch.einsum("...tk,...kv->...tv", qc, S) + torch.einsum("...tj,...jv->...tv", a, vc)
                den = torch.einsum("...tk,...k->...t", qc, z) + a.sum(-1)
                out.append(num / den[..., None])
                S = S + torch.einsum("...jk,...jv->...kv", kc, vc)
                z = z + kc.sum(-2)
            return torch.cat(out, -2)
    """),
    "linear_attention_chunked carrying cumulative sums inside each chunk": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out, start, L = [], 0, q.shape[-2]
            while start < L:
                stop = min(start + chunk_size, L)
                Sc = S.unsqueeze(-3) + torch.cumsum(fk[..., start:stop, :, None] * v[..., start:stop, None, :], -3)
                zc = z.unsqueeze(-2) + torch.cumsum(fk[..., start:stop, :], -2)
                qc = fq[..., start:stop, :]
                out.append((qc[..., None] * Sc).sum(-2) / (qc * zc).sum(-1, keepdim=True))
                S, z, start = Sc[..., -1, :, :], zc[..., -1, :], stop
            return torch.cat(out, -2)
    """),
    "gated_linear_attention in parallel form with a decay mask": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            L = q.shape[-2]
            c = torch.cumsum(torch.log(gates), -1)
            D = torch.exp(c[..., :, None] - c[..., None, :]) * torch.ones(L, L).tril()
            out = ((q @ k.transpose(-2, -1)) * D) @ v
            state = torch.einsum("...j,...jk,...jv->...kv", D[..., -1, :], k, v)
            return out, state
    """),
    "gated_linear_attention with einsum in a loop, in float64": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=torch.float64)
            outs = []
            for t in range(q.shape[-2]):
                S = torch.einsum("...,...kv->...kv", gates[..., t].double(), S) \
                    + torch.einsum("...k,...v->...kv", k[..., t, :].double(), v[..., t, :].double())
                outs.append(torch.einsum("...k,...kv->...v", q[..., t, :].double(), S))
            return torch.stack(outs, -2).to(q.dtype), S.to(q.dtype)
    """),
    "delta_rule_step with matmul": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            predicted = (k.unsqueeze(-2) @ S).squeeze(-2)
            return S + beta.unsqueeze(-1).unsqueeze(-1) * (k.unsqueeze(-1) @ (v - predicted).unsqueeze(-2))
    """),
    "delta_rule_step as erase then write": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            b = beta[..., None, None]
            kk = k[..., :, None] * k[..., None, :]                         # k k^T
            eye = torch.eye(k.shape[-1], dtype=S.dtype)
            return (eye - b * kk) @ S + b * k[..., :, None] * v[..., None, :]
    """),
    "concepts as expressions": ("test_concepts", """
        state_mib = float(32 * 32 * 128 * 128 * 2) / (1024 * 1024)
        same_size_tokens = (128 * 128) // 256
        recall_answer = "b"
    """),
}


MISTAKES = {
    # Exercise 1
    "parallel: normalised by the number of tokens": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril()
            return (a @ v) / torch.arange(1, L + 1, dtype=q.dtype)[:, None]
    """, "number of tokens"),
    "parallel: no normaliser": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            return ((elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril()) @ v
    """, "not normalised"),
    "parallel: normaliser summed over every key, future included": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)
            return ((a * torch.ones(L, L).tril()) @ v) / a.sum(-1, keepdim=True)
    """, "denominator sums the weights of every key"),
    "parallel: a softmax over the masked kernel": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)
            a = a.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
            return torch.softmax(a, -1) @ v
    """, "go through a softmax"),
    "parallel: no causal mask": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            a = elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)
            return (a @ v) / a.sum(-1, keepdim=True)
    """, "every query reads every key"),
    "parallel: mask without the diagonal": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril(-1)
            return (a @ v) / a.sum(-1, keepdim=True).clamp_min(1e-6)
    """, "diagonal is masked"),
    "parallel: phi applied to the values too": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril()
            return (a @ elu_plus_one(v)) / a.sum(-1, keepdim=True)
    """, "phi is applied to the values"),
    "parallel: exp as the feature map": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (torch.exp(q) @ torch.exp(k).transpose(-2, -1)) * torch.ones(L, L).tril()
            return (a @ v) / a.sum(-1, keepdim=True)
    """, "feature map is exp"),
    "parallel: the result detached from autograd": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril()
            return ((a @ v) / a.sum(-1, keepdim=True)).detach()
    """, "cut from q, k and v"),
    "parallel: phi applied to the scores q.k instead of to q and k": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = elu_plus_one(q @ k.transpose(-2, -1)) * torch.ones(L, L).tril()
            return (a @ v) / a.sum(-1, keepdim=True)
    """, "applied to the scores"),
    "parallel: mask without the diagonal, and no guard for the empty first row": ("test_linear_attention_parallel", """
        def linear_attention_parallel(q, k, v):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)).masked_fill(
                ~torch.ones(L, L, dtype=torch.bool).tril(-1), 0.0)
            return (a @ v) / a.sum(-1, keepdim=True)
    """, ("row 0", "diagonal is masked")),
    # Exercise 2
    "step: the state read before it is updated": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            o = (fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1, keepdim=True)
            return o, S + fk[..., :, None] * v_t[..., None, :], z + fk
    """, "first, then read"),
    "step: no normaliser": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            S = S + fk[..., :, None] * v_t[..., None, :]
            return (fq[..., :, None] * S).sum(-2), S, z + fk
    """, "without its denominator"),
    "step: z accumulates phi(q)": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            S, z = S + fk[..., :, None] * v_t[..., None, :], z + fq
            return (fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1, keepdim=True), S, z
    """, "z_new adds phi(q_t)"),
    "step: raw k written into S": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            S, z = S + k_t[..., :, None] * v_t[..., None, :], z + fk
            return (fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1, keepdim=True), S, z
    """, "raw key"),
    "step: the state updated in place": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            S += fk[..., :, None] * v_t[..., None, :]
            z += fk
            return (fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1, keepdim=True), S, z
    """, "in place"),
    "step: the outer product transposed, v k^T": ("test_linear_attention_step", """
        def linear_attention_step(S, z, q_t, k_t, v_t):
            fq, fk = elu_plus_one(q_t), elu_plus_one(k_t)
            S, z = S + v_t[..., :, None] * fk[..., None, :], z + fk
            return (S * fq[..., None, :]).sum(-1) / (fq * z).sum(-1, keepdim=True), S, z
    """, "v_t phi(k_t)^T"),
    # Exercise 3
    "chunked: the state updated with the chunk before the chunk reads it": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2], chunk_size):
                qc, kc, vc = fq[..., c0:c0 + chunk_size, :], fk[..., c0:c0 + chunk_size, :], v[..., c0:c0 + chunk_size, :]
                C = qc.shape[-2]
                S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2)
                a = (qc @ kc.transpose(-2, -1)) * torch.ones(C, C).tril()
                out.append((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True)))
            return torch.cat(out, -2)
    """, "already holds the chunk itself"),
    "chunked: the last, shorter chunk dropped": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2] - chunk_size + 1, chunk_size):
                qc, kc, vc = fq[..., c0:c0 + chunk_size, :], fk[..., c0:c0 + chunk_size, :], v[..., c0:c0 + chunk_size, :]
                a = (qc @ kc.transpose(-2, -1)) * torch.ones(chunk_size, chunk_size).tril()
                out.append((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True)))
                S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2)
            return torch.cat(out, -2)
    """, "last, shorter chunk"),
    "chunked: the carried state misses the last token of each chunk": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2], chunk_size):
                qc, kc, vc = fq[..., c0:c0 + chunk_size, :], fk[..., c0:c0 + chunk_size, :], v[..., c0:c0 + chunk_size, :]
                C = qc.shape[-2]
                a = (qc @ kc.transpose(-2, -1)) * torch.ones(C, C).tril()
                out.append((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True)))
                S, z = S + kc[..., :-1, :].transpose(-2, -1) @ vc[..., :-1, :], z + kc[..., :-1, :].sum(-2)
            return torch.cat(out, -2)
    """, "misses the last token"),
    "chunked: the diagonal masked inside a chunk": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2], chunk_size):
                qc, kc, vc = fq[..., c0:c0 + chunk_size, :], fk[..., c0:c0 + chunk_size, :], v[..., c0:c0 + chunk_size, :]
                C = qc.shape[-2]
                a = (qc @ kc.transpose(-2, -1)) * torch.ones(C, C).tril(-1)
                out.append((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True) + 1e-6))
                S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2)
            return torch.cat(out, -2)
    """, "diagonal is masked inside a chunk"),
    "chunked: no mask inside a chunk": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2], chunk_size):
                qc, kc, vc = fq[..., c0:c0 + chunk_size, :], fk[..., c0:c0 + chunk_size, :], v[..., c0:c0 + chunk_size, :]
                a = qc @ kc.transpose(-2, -1)
                out.append((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True)))
                S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2)
            return torch.cat(out, -2)
    """, "no causal mask inside a chunk"),
    "chunked: chunks that overlap by one token": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            fq, fk = elu_plus_one(q), elu_plus_one(k)
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            out = []
            for c0 in range(0, q.shape[-2], chunk_size):
                end = c0 + chunk_size + 1
                qc, kc, vc = fq[..., c0:end, :], fk[..., c0:end, :], v[..., c0:end, :]
                C = qc.shape[-2]
                a = (qc @ kc.transpose(-2, -1)) * torch.ones(C, C).tril()
                out.append(((qc @ S + a @ vc) / (qc @ z[..., None] + a.sum(-1, keepdim=True)))[..., :chunk_size, :])
                S, z = S + kc.transpose(-2, -1) @ vc, z + kc.sum(-2)
            return torch.cat(out, -2)
    """, "overlap by one token"),
    "chunked: the whole (L, L) weights, sliced into chunks afterwards": ("test_linear_attention_chunked", """
        def linear_attention_chunked(q, k, v, chunk_size):
            L = q.shape[-2]
            a = (elu_plus_one(q) @ elu_plus_one(k).transpose(-2, -1)) * torch.ones(L, L).tril()
            full = (a @ v) / a.sum(-1, keepdim=True)
            return torch.cat(list(full.split(chunk_size, dim=-2)), dim=-2)
    """, "one chunk at a time"),
    # Exercise 4
    "gated: the decay applied to the new term as well": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            outs = []
            for t in range(q.shape[-2]):
                S = gates[..., t, None, None] * (S + k[..., t, :, None] * v[..., t, None, :])
                outs.append((q[..., t, :, None] * S).sum(-2))
            return torch.stack(outs, -2), S
    """, "its own gate"),
    "gated: the gate of the previous token": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            outs = []
            for t in range(q.shape[-2]):
                a = gates[..., t - 1] if t > 0 else torch.ones_like(gates[..., 0])
                S = a[..., None, None] * S + k[..., t, :, None] * v[..., t, None, :]
                outs.append((q[..., t, :, None] * S).sum(-2))
            return torch.stack(outs, -2), S
    """, "previous token's gate"),
    "gated: the state read before the token is written": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            outs = []
            for t in range(q.shape[-2]):
                outs.append((q[..., t, :, None] * S).sum(-2))
                S = gates[..., t, None, None] * S + k[..., t, :, None] * v[..., t, None, :]
            return torch.stack(outs, -2), S
    """, "read before token t is written"),
    "gated: 1 - a taken as the gate": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            outs = []
            for t in range(q.shape[-2]):
                S = (1 - gates[..., t, None, None]) * S + k[..., t, :, None] * v[..., t, None, :]
                outs.append((q[..., t, :, None] * S).sum(-2))
            return torch.stack(outs, -2), S
    """, "multiplied by 1 - a_t"),
    "gated: decay mask with the gate of key j included": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            L = q.shape[-2]
            c = torch.cumsum(torch.log(gates), -1)
            c_before = c - torch.log(gates)
            D = torch.exp(c[..., :, None] - c_before[..., None, :]) * torch.ones(L, L).tril()
            out = ((q @ k.transpose(-2, -1)) * D) @ v
            return out, torch.einsum("...j,...jk,...jv->...kv", D[..., -1, :], k, v)
    """, "its own gate"),
    "gated: the feature map and normaliser of Exercise 1 kept": ("test_gated_linear_attention", """
        def gated_linear_attention(q, k, v, gates):
            S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
            z = q.new_zeros(*q.shape[:-2], q.shape[-1])
            outs = []
            for t in range(q.shape[-2]):
                fk, fq = elu_plus_one(k[..., t, :]), elu_plus_one(q[..., t, :])
                S = gates[..., t, None, None] * S + fk[..., :, None] * v[..., t, None, :]
                z = gates[..., t, None] * z + fk
                outs.append((fq[..., :, None] * S).sum(-2) / (fq * z).sum(-1, keepdim=True))
            return torch.stack(outs, -2), S
    """, "feature map and normaliser"),
    # Exercise 5
    "delta: k v^T added without the correction": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            return S + beta[..., None, None] * k[..., :, None] * v[..., None, :]
    """, "without the correction"),
    "delta: the correction's sign flipped": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            predicted = (k[..., :, None] * S).sum(-2)
            return S + beta[..., None, None] * k[..., :, None] * (v + predicted)[..., None, :]
    """, "sign is flipped"),
    "delta: beta on the new value only": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            predicted = (k[..., :, None] * S).sum(-2)
            return S + k[..., :, None] * (beta[..., None] * v - predicted)[..., None, :]
    """, "beta multiplies the new value only"),
    "delta: the key normalised again": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            k = F.normalize(k, dim=-1)
            predicted = (k[..., :, None] * S).sum(-2)
            return S + beta[..., None, None] * k[..., :, None] * (v - predicted)[..., None, :]
    """, "you normalised k"),
    "delta: S updated in place": ("test_delta_rule_step", """
        def delta_rule_step(S, k, v, beta):
            predicted = (k[..., :, None] * S).sum(-2)
            S += beta[..., None, None] * k[..., :, None] * (v - predicted)[..., None, :]
            return S
    """, "in place"),
    # Exercise 6
    "concepts: the state counted in 4-byte floats": ("test_concepts", """
        state_mib = 32 * 32 * 128 * 128 * 4 / 2**20
        same_size_tokens = 64
        recall_answer = "b"
    """, "4 bytes a number"),
    "concepts: the cache counted without its values": ("test_concepts", """
        state_mib = 32.0
        same_size_tokens = 128
        recall_answer = "b"
    """, "keys without values"),
    "concepts: the gate chosen": ("test_concepts", """
        state_mib = 32.0
        same_size_tokens = 64
        recall_answer = "a"
    """, "only chooses what to forget"),
    "concepts: the state in MB (10^6 bytes) instead of MiB": ("test_concepts", """
        state_mib = 32 * 32 * 128 * 128 * 2 / 1e6
        same_size_tokens = 64
        recall_answer = "b"
    """, "MB (10^6 bytes)"),
    "concepts: the state counted in bits": ("test_concepts", """
        state_mib = 32 * 32 * 128 * 128 * 16 / 2**20
        same_size_tokens = 64
        recall_answer = "b"
    """, "bits, not bytes"),
    "concepts: the state of one layer only": ("test_concepts", """
        state_mib = 32 * 128 * 128 * 2 / 2**20
        same_size_tokens = 64
        recall_answer = "b"
    """, "one layer's state"),
    "concepts: the state counted with z": ("test_concepts", """
        state_mib = 32 * 32 * (128 * 128 + 128) * 2 / 2**20
        same_size_tokens = 64
        recall_answer = "b"
    """, "z as well as S"),
    "concepts: the state in numbers against the cache in bytes": ("test_concepts", """
        state_mib = 32.0
        same_size_tokens = 128 * 128 // (2 * 128 * 2)
        recall_answer = "b"
    """, "state in numbers against the cache in bytes"),
    "concepts: more training chosen": ("test_concepts", """
        state_mib = 32.0
        same_size_tokens = 64
        recall_answer = "c"
    """, "training steps"),
}
