"""Lesson 3's hidden tests catch the common mistakes (and pass the reference solution).

Each case takes a test cell's source from solutions/03_queries_keys_values.ipynb,
runs it after the set-up cell and the solution cells, with one answer replaced
by a mistaken version, and expects it to fail.
"""


LESSON = "03_queries_keys_values"


MISTAKES = {
    # softmax
    "softmax without subtracting the maximum": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(np.asarray(x, dtype=float))
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "softmax with one global maximum": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(np.asarray(x, dtype=float) - np.max(x))
            return e / e.sum(axis=axis, keepdims=True)
    """),
    "softmax that ignores axis": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(x - np.max(x, axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
    """),
    "softmax normalised over the whole array": ("test_softmax", """
        def softmax(x, axis=-1):
            e = np.exp(x - np.max(x, axis=axis, keepdims=True))
            return e / e.sum()
    """),
    # numpy attention
    "numpy attention without the scale": ("test_attention_np", """
        def scaled_dot_product_attention_np(Q, K, V):
            w = softmax(Q @ np.swapaxes(K, -1, -2), axis=-1)
            return w @ V, w
    """),
    "numpy attention divided by d_k": ("test_attention_np", """
        def scaled_dot_product_attention_np(Q, K, V):
            w = softmax(Q @ np.swapaxes(K, -1, -2) / Q.shape[-1], axis=-1)
            return w @ V, w
    """),
    "numpy attention with the softmax over the queries": ("test_attention_np", """
        def scaled_dot_product_attention_np(Q, K, V):
            w = softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-2)
            return w @ V, w
    """),
    "numpy attention with K.T on batches": ("test_attention_np", """
        def scaled_dot_product_attention_np(Q, K, V):
            w = softmax(Q @ K.T / np.sqrt(Q.shape[-1]), axis=-1)
            return w @ V, w
    """),
    # torch attention
    "torch attention without the scale": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """),
    "torch attention with the mask after the softmax": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            if mask is not None:
                w = w * mask
            return w @ v, w
    """),
    "torch attention with an inverted mask": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """),
    "torch attention that sets masked scores to 0": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, 0.0)
            w = torch.softmax(s, dim=-1)
            return w @ v, w
    """),
    "torch attention with the softmax over the queries": ("test_attention_torch", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-2)
            return w @ v, w
    """),
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
    """),
    "SelfAttention that ignores the mask": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k, bias=False)
                self.W_K = nn.Linear(d_model, d_k, bias=False)
                self.W_V = nn.Linear(d_model, d_v or d_k, bias=False)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x))
    """),
    "SelfAttention with biases": ("test_self_attention", """
        class SelfAttention(nn.Module):
            def __init__(self, d_model, d_k, d_v=None):
                super().__init__()
                self.W_Q = nn.Linear(d_model, d_k)
                self.W_K = nn.Linear(d_model, d_k)
                self.W_V = nn.Linear(d_model, d_v or d_k)
            def forward(self, x, mask=None):
                return scaled_dot_product_attention(self.W_Q(x), self.W_K(x), self.W_V(x), mask)
    """),
    # permutation gap
    "permutation_gap without shuffling the output": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)).abs().max().item()
    """),
    "permutation_gap with the inverse permutation": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, torch.argsort(perm)]).abs().max().item()
    """),
    "permutation_gap along the batch axis": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            perm = perm[perm < x.shape[0]]
            with torch.no_grad():
                return (fn(x[perm]) - fn(x)[perm]).abs().max().item()
    """),
    "permutation_gap returning a tensor": ("test_permutation_gap", """
        def permutation_gap(fn, x, perm):
            with torch.no_grad():
                return (fn(x[:, perm]) - fn(x)[:, perm]).abs().max()
    """),
}
