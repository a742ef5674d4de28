"""Lesson 3's hidden tests catch the common mistakes (and pass the reference solution).

Each case takes a test cell's source from solutions/03_queries_keys_values.ipynb,
runs it after the set-up cell and the solution cells, with one answer replaced
by a mistaken version, and expects it to fail.
"""


LESSON = "03_queries_keys_values"


MISTAKES = {
    "a stateful softmax, right in its own test and float32 once attention_row has run": ("test_attention_np", """
        _attention_ran = []
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=np.float32 if _attention_ran else np.float64)
            e = np.exp(x - np.max(x, axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
        def attention_row(q, K, V):
            _attention_ran.append(True)
            weights = softmax(K @ q / np.sqrt(len(q)))
            return weights @ V, weights
    """, ('float32 weights', 'float64 throughout')),
    "attention_row computed in float32": ("test_attention_np", """
        def attention_row(q, K, V):
            q32, K32, V32 = (np.asarray(t, dtype=np.float32) for t in (q, K, V))
            weights = softmax(K32 @ q32 / np.float32(np.sqrt(len(q))))
            return weights @ V32, weights
    """, 'computed in float32'),
    # softmax
    "softmax without subtracting the maximum": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(np.asarray(x, dtype=float))
            return e / e.sum(axis=axis, keepdims=True)
    """, ('overflowed', 'subtract the maximum')),
    "softmax with one global maximum": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(np.asarray(x, dtype=float) - np.max(x))
            return e / e.sum(axis=axis, keepdims=True)
    """, 'one maximum for the whole array'),
    "softmax that ignores axis": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(x - np.max(x, axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
    """, 'whatever `axis` says'),
    "softmax normalised over the whole array": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(x - np.max(x, axis=axis, keepdims=True))
            return e / e.sum()
    """, 'sum of the whole array'),
    "softmax that subtracts the mean instead of the maximum": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=float)
            e = np.exp(x - x.mean(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)
    """, 'not the mean'),
    "softmax returning float32": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=float)
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)
    """, ('returned float32', 'return float64')),
    # one row of attention, by hand and in numpy
    "attention row without the scale": ("test_attention_np", """
        def attention_row(q, K, V):
            w = softmax(K @ q)
            return w @ V, w
    """, ('unscaled scores', 'sqrt(d_k)')),
    "attention row divided by d_k": ("test_attention_np", """
        def attention_row(q, K, V):
            w = softmax(K @ q / q.shape[-1])
            return w @ V, w
    """, 'divided by d_k'),
    "attention row that averages the values": ("test_attention_np", """
        def attention_row(q, K, V):
            w = softmax(K @ q / np.sqrt(q.shape[-1]))
            return V.mean(0), w
    """, 'plain average of the rows of V'),
    "attention row through PyTorch's operator": ("test_attention_np", """
        def attention_row(q, K, V):
            t = lambda a: torch.as_tensor(a, dtype=torch.float64)
            out = F.scaled_dot_product_attention(t(q)[None], t(K), t(V))[0].numpy()
            return out, softmax(K @ q / np.sqrt(q.shape[-1]))
    """, 'called torch.nn.functional.scaled_dot_product_attention'),
    "hand-computed weights without the scale": ("test_attention_np", """
        scores_by_hand = [2.0, 0.0, 2.0]
        weights_by_hand = [0.47, 0.06, 0.47]
        output_by_hand = [7.04, 2.94]
    """, ('scores_by_hand', 'without the division by sqrt(d_k)')),
    "hand-computed output that forgets the third value": ("test_attention_np", """
        output_by_hand = [4.22, 1.55]
    """, 'output_by_hand leaves out the third value'),
    "hand-computed numbers given as a lying float subclass": ("test_attention_np", """
        class _Liar(float):
            def __sub__(self, other): return 0.0
            def __rsub__(self, other): return 0.0
            def __eq__(self, other): return True
        scores_by_hand = [_Liar(0)] * 3
        weights_by_hand = [_Liar(0)] * 3
        output_by_hand = [_Liar(0)] * 2
    """, 'not a plain number'),
    # torch attention
    "torch attention without the scale": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'not scaled'),
    "torch attention with the mask after the softmax": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            if mask is not None:
                w = w * mask
            return w @ v, w
    """, 'zero the weights after the softmax'),
    "torch attention with an inverted mask": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'the mask is inverted'),
    "torch attention that sets masked scores to 0": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, 0.0)
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'set the masked scores to 0'),
    "torch attention with the softmax over the queries": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-2)
            return w @ v, w
    """, 'over the queries'),
    # self-attention module
    "SelfAttention with keys from W_Q": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k, bias=False)
                self.W_K = nn.Linear(d_model, d_k, bias=False)
                self.W_V = nn.Linear(d_model, d_v or d_k, bias=False)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_Q(x), self.W_V(x), mask)
    """, 'keys come from W_Q'),
    "SelfAttention that ignores the mask": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k, bias=False)
                self.W_K = nn.Linear(d_model, d_k, bias=False)
                self.W_V = nn.Linear(d_model, d_v or d_k, bias=False)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x))
    """, 'ignores the mask'),
    "SelfAttention with biases": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k)
                self.W_K = nn.Linear(d_model, d_k)
                self.W_V = nn.Linear(d_model, d_v or d_k)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)
    """, ('biases', 'bias=False')),
    # permutation gap
    "permutation_gap without shuffling the output": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)).abs().max().item()
    """, 'fn(x) unshuffled'),
    "permutation_gap with the inverse permutation": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, torch.argsort(perm)]).abs().max().item()
    """, 'inverse permutation'),
    "permutation_gap along the batch axis": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            perm = perm[perm < x.shape[0]]
            with torch.no_grad():
                return (fn(x[perm]) - fn(x)[perm]).abs().max().item()
    """, 'reorders the batch axis'),
    "permutation_gap returning a tensor": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, perm]).abs().max()
    """, ('got a tensor', '.item()')),
    "permutation_gap with the signed maximum": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, perm]).max().item()
    """, 'signed maximum'),
    "permutation_gap with the mean absolute gap": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, perm]).abs().mean().item()
    """, 'mean absolute difference'),
    "permutation_gap returning a lying float subclass": ("test_permutation_gap", """
        class _Liar(float):
            def __lt__(self, other): return True
            def __gt__(self, other): return True
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return _Liar((fn(x[:, perm]) - fn(x)[:, perm]).abs().max().item())
    """, 'not a built-in float'),
    # building it: PyTorch's operator is unavailable in the hidden tests
    "torch attention through F.scaled_dot_product_attention": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return out, torch.softmax(s, dim=-1)
    """, 'called torch.nn.functional.scaled_dot_product_attention'),
    "torch attention that ignores the mask of padded keys (only the last key)": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s[..., -1:] = s[..., -1:].masked_fill(~mask[..., -1:], float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'ignore the mask'),
    "torch attention in float64 whatever the input": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            q, k, v = q.double(), k.double(), v.double()
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'dtype of the inputs'),
    "SelfAttention through F.scaled_dot_product_attention": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                q, k, v = self.W_Q(x), self.W_K(x), self.W_V(x)
                w = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(
                    ~mask if mask is not None else torch.zeros((), dtype=torch.bool), float("-inf")), -1)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), w
    """, 'called torch.nn.functional.scaled_dot_product_attention'),
    "SelfAttention with values from W_K": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_K(x)[..., :self.W_V.out_features], mask)
    """, 'values come from W_K'),
    "concept: MB instead of MiB": ("test_concepts", """
        weights_mib = 4.0
    """, ('weights_mib', 'size in MB')),
    "concept: the variance instead of the standard deviation": ("test_concepts", """
        score_std = 256
    """, ('score_std', 'variance')),
    "concept: more heads see the order": ("test_concepts", """
        order_answer = "a"
    """, ('order_answer', 'more heads')),
    # issue 19 section 8: each of these must fail its own cell and no other
    "softmax that subtracts the maximum in place (changes the caller's array)": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=float)
            x -= np.max(x, axis=axis, keepdims=True)
            e = np.exp(x)
            return e / e.sum(axis=axis, keepdims=True)
    """, 'changed its input in place'),
    "attention row that scales q in place": ("test_attention_np", """
        def attention_row(q, K, V):
            q /= np.sqrt(q.shape[-1])
            weights = softmax(K @ q)
            return weights @ V, weights
    """, 'changed its input in place'),
    "torch attention that scales q in place": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            q.div_(math.sqrt(q.shape[-1]))
            s = q @ k.transpose(-2, -1)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, 'changed its input in place'),
    "torch attention whose weights are detached (no gradient to q and k)": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).detach()
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, ('no gradient reached q', 'no .detach()')),
    "torch attention with the softmax over the queries, unscaled (charged to Exercise 3 only)": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            w = torch.softmax(q @ k.transpose(-2, -1), dim=-2)
            return w @ v, w
    """, 'over the queries'),
    "SelfAttention that detaches the queries (no gradient to W_Q)": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x).detach(), self.W_K(x), self.W_V(x), mask)
    """, ('no gradient reached W_Q', '.detach()')),
    "SelfAttention that scales x in place": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                x.mul_(1.0)
                x.add_(0.0 * x + 1e-3)
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)
    """, 'changed its input in place'),
    "permutation_gap that shuffles x in place": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                original = fn(x)[:, perm]
                x[:] = x[:, perm]
                return (fn(x) - original).abs().max().item()
    """, 'changed its input in place'),
    # two wrong answers that agree: the module may not earn its points by matching an all-zero Exercise 3
    "SelfAttention and scaled_dot_product_attention both returning zeros": ("test_self_attention", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])

        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k, bias=False)
                self.W_K = nn.Linear(d_model, d_k, bias=False)
                self.W_V = nn.Linear(d_model, d_v or d_k, bias=False)
            def forward(self, x, mask=None):
                v = self.W_V(x)
                return 0 * v, torch.zeros(*x.shape[:-1], x.shape[-2])
    """, 'all zero'),
    # a wrong Exercise 3 under a right module: charged to Exercise 3 only (a correct one stands in for it)
    "scaled_dot_product_attention returning zeros, under a right SelfAttention": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])
    """, 'every weight is 0'),
}


# issue 55: more of the usual mistakes, each with the words its diagnosis must contain
MISTAKES.update({
    "softmax without keepdims (the maximum does not line up with x)": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=float)
            e = np.exp(x - np.max(x, axis=axis))
            return e / np.sum(e, axis=axis)
    """, ("raised", "keepdims=True")),
    "softmax dividing the shifted exponentials by the sum of the unshifted ones": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=float)
            return np.exp(x - np.max(x, axis=axis, keepdims=True)) / np.sum(np.exp(x), axis=axis, keepdims=True)
    """, "sum of the unshifted"),
    "attention row scaled by sqrt(L_k), the number of keys": ("test_attention_np", """
        def attention_row(q, K, V):
            w = softmax(K @ q / np.sqrt(len(K)))
            return w @ V, w
    """, "sqrt(L_k)"),
    "attention row scaled by sqrt(d_v)": ("test_attention_np", """
        def attention_row(q, K, V):
            w = softmax(K @ q / np.sqrt(V.shape[-1]))
            return w @ V, w
    """, "sqrt(d_v)"),
    "attention row returning the scaled scores as its weights": ("test_attention_np", """
        def attention_row(q, K, V):
            scores = K @ q / np.sqrt(len(q))
            return softmax(scores) @ V, scores
    """, "scaled scores themselves"),
    "hand-computed scores divided by d_k": ("test_attention_np", """
        scores_by_hand = [0.5, 0.0, 0.5]
        weights_by_hand = [0.38, 0.23, 0.38]
        output_by_hand = [5.77, 4.23]
    """, ("scores_by_hand", "divided by d_k = 4")),
    "hand-computed weights that are not normalised": ("test_attention_np", """
        weights_by_hand = [2.72, 1.0, 2.72]
    """, ("weights_by_hand", "without dividing by their sum")),
    "hand-computed output as the plain average of the values": ("test_attention_np", """
        output_by_hand = [5.0, 5.0]
    """, ("output_by_hand", "plain average")),
    "torch attention with k.transpose(1, 2), right for 3-D inputs only": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, ("4-D inputs", "k.transpose(-2, -1)")),
    "torch attention scaled by sqrt(d_v)": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """, "sqrt(d_v)"),
    "SelfAttention with queries and keys swapped": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_K(x), self.W_Q(x), self.W_V(x), mask)
    """, "queries and keys are swapped"),
    "SelfAttention returning only the output": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)[0]
    """, "pair (output, weights)"),
    "SelfAttention with W_V of size d_k whatever d_v": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k, bias=False)
                self.W_K = nn.Linear(d_model, d_k, bias=False)
                self.W_V = nn.Linear(d_model, d_k, bias=False)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)
    """, "W_V maps to d_k"),
    "SelfAttention with nn.Linear's in and out features swapped": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_k, d_model, bias=False)
                self.W_K = nn.Linear(d_k, d_model, bias=False)
                self.W_V = nn.Linear(d_v or d_k, d_model, bias=False)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)
    """, "in_features and out_features swapped"),
    "permutation_gap indexing the batch axis, x[perm]": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[perm]) - fn(x)[perm]).abs().max().item()
    """, "index the sequence axis"),
    "concept: bits instead of bytes": ("test_concepts", """
        weights_mib = 1000 * 1000 * 32 / 2**20
    """, ("weights_mib", "32 bits")),
    "concept: float64, 8 bytes a number": ("test_concepts", """
        weights_mib = 1000 * 1000 * 8 / 2**20
    """, ("weights_mib", "8 bytes per number")),
    "concept: the standard deviation of one product": ("test_concepts", """
        score_std = 1.0
    """, ("score_std", "one product")),
    "concept: a larger d_k sees the order": ("test_concepts", """
        order_answer = "c"
    """, ("order_answer", "larger d_k")),
})


ALTERNATIVES = {
    "softmax with scipy-style logsumexp": ("test_softmax", """
        def softmax(x, axis=-1):
            x = np.asarray(x, dtype=np.float64)
            m = np.max(x, axis=axis, keepdims=True)
            return np.exp(x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)))
    """),
    "attention row with an explicit loop over the keys": ("test_attention_np", """
        def attention_row(q, K, V):
            scores = np.array([sum(qi * ki for qi, ki in zip(q, k)) for k in K]) / np.sqrt(len(q))
            weights = softmax(scores)
            output = np.zeros(V.shape[1])
            for w, v in zip(weights, V):
                output = output + w * v
            return output, weights
    """),
    "hand-computed numbers rounded to one decimal and as numpy floats": ("test_attention_np", """
        scores_by_hand = [np.float64(1), 0, 1]
        weights_by_hand = [0.42, 0.155, 0.422]
        output_by_hand = [6.33, 3.66]
    """),
    "torch attention with torch.where and einsum": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
            if mask is not None:
                s = torch.where(mask, s, torch.tensor(float("-inf"), dtype=s.dtype))
            w = s.softmax(-1)
            return torch.einsum("...qk,...kv->...qv", w, v), w
    """),
    "torch attention with a max shift and exp by hand": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(k.shape[-1])
            if mask is not None:
                s = s.masked_fill(mask.logical_not(), float("-inf"))
            e = torch.exp(s - s.amax(-1, keepdim=True))
            w = e / e.sum(-1, keepdim=True)
            return torch.matmul(w, v), w
    """),
    "SelfAttention that computes the attention inline": ("test_self_attention", """
        class SelfAttention(SelfAttention):
            def forward(self, x, mask=None):
                q, k, v = self.W_Q(x), self.W_K(x), self.W_V(x)
                s = q @ k.transpose(1, 2) / q.shape[-1] ** 0.5
                if mask is not None:
                    s = torch.where(mask, s, float("-inf"))
                w = s.softmax(-1)
                return w @ v, w
    """),
    "permutation_gap with numpy and the inverse on the other side": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            inverse = torch.argsort(perm)
            with torch.no_grad():
                a = fn(x[:, perm])[:, inverse].numpy()
                b = fn(x).numpy()
            return float(np.max(np.abs(a - b)))
    """),
}


ALSO_FAILS = {
    "SelfAttention and scaled_dot_product_attention both returning zeros": (
        ("test_attention_torch",), "two answers are wrong: Exercise 3's own test fails its all-zero function"),
}
