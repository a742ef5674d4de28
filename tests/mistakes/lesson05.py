"""Lesson 5's hidden tests catch the common mistakes (and pass the reference solution).

Each case takes a test cell's source from solutions/05_multi_head_attention.ipynb,
runs it after the set-up cell, the ready-made `attend` cell and the solution
cells, with one answer replaced by a mistaken version, and expects it to fail.
"""


LESSON = "05_multi_head_attention"


# A correct MultiHeadAttention whose forward pass is spelled out, so that each mistake
# below changes one line of it.
_MHA = """
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads, bias=True):
            super().__init__()
            if d_model % num_heads:
                raise ValueError("num_heads must divide d_model")
            self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
            self.w_q = nn.Linear(d_model, d_model, bias=bias)
            self.w_k = nn.Linear(d_model, d_model, bias=bias)
            self.w_v = nn.Linear(d_model, d_model, bias=bias)
            self.w_o = nn.Linear(d_model, d_model, bias=bias)

        def forward(self, query, key, value, mask=None):
            B, Lq, D = query.shape
            Lk = key.shape[1]
            q = self.w_q(query).reshape(B, Lq, self.num_heads, self.head_dim).transpose(1, 2)
            k = self.w_k(key).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)
            v = self.w_v(value).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            if mask is not None:
                if mask.dim() == 3:
                    mask = mask.unsqueeze(1)
                scores = torch.where(mask, scores, torch.tensor(float("-inf")))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            out = (weights @ v).transpose(1, 2).reshape(B, Lq, D)
            return self.w_o(out), weights
"""


def _mha_with(old, new):
    assert old in _MHA, old
    return _MHA.replace(old, new)


MISTAKES = {
    "module whose attention runs under torch.no_grad (nothing trains)": ("test_multi_head_attention", """
        class MultiHeadAttention(MultiHeadAttention):
            @torch.no_grad()
            def forward(self, query, key, value, mask=None):
                return super().forward(query, key, value, mask)
    """),
    # charged once: the later exercises are graded with reference pieces
    "split_heads reshaped straight to (B, H, L, d)": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, num_heads, L, D // num_heads)
    """),
    # split_heads / merge_heads
    "split without the transpose": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, num_heads, L, D // num_heads)
    """),
    "split with heads taking every H-th feature": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)
    """),
    "merge without the transpose": ("test_merge_heads", """
        def merge_heads(x):
            B, H, L, d = x.shape
            return x.reshape(B, L, H * d)
    """),
    # MultiHeadAttention
    "heads reshaped without the transpose": ("test_multi_head_attention", _mha_with(
        "q = self.w_q(query).reshape(B, Lq, self.num_heads, self.head_dim).transpose(1, 2)",
        "q = self.w_q(query).reshape(B, self.num_heads, Lq, self.head_dim)").replace(
        "k = self.w_k(key).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "k = self.w_k(key).reshape(B, self.num_heads, Lk, self.head_dim)").replace(
        "v = self.w_v(value).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "v = self.w_v(value).reshape(B, self.num_heads, Lk, self.head_dim)")),
    "heads merged without the transpose": ("test_multi_head_attention", _mha_with(
        "out = (weights @ v).transpose(1, 2).reshape(B, Lq, D)", "out = (weights @ v).reshape(B, Lq, D)")),
    "missing output projection": ("test_multi_head_attention", _mha_with(
        "return self.w_o(out), weights", "return out, weights")),
    "mask applied to the first head only": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))',
        'scores = torch.cat([torch.where(mask, scores[:, :1], torch.tensor(float("-inf"))), scores[:, 1:]], 1)')),
    "mask applied to the last head only": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))',
        'scores = torch.cat([scores[:, :-1], torch.where(mask, scores[:, -1:], torch.tensor(float("-inf")))], 1)')),
    "3-D mask broadcast over heads instead of batch": ("test_multi_head_attention", _mha_with(
        "if mask.dim() == 3:", "if False:")),
    "mask inverted": ("test_multi_head_attention", _mha_with(
        'torch.where(mask, scores,', 'torch.where(~mask, scores,')),
    "mask applied after the softmax": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))', 'pass').replace(
        "weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)",
        "weights = torch.softmax(scores, dim=-1)\n"
        "            weights = weights * mask if mask is not None else weights")),
    "scaled by sqrt(d_model) instead of sqrt(head_dim)": ("test_multi_head_attention", _mha_with(
        "math.sqrt(self.head_dim)", "math.sqrt(self.d_model)")),
    "no scale": ("test_multi_head_attention", _mha_with("/ math.sqrt(self.head_dim)", "")),
    "softmax over the query axis": ("test_multi_head_attention", _mha_with(
        "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")),
    "keys taken from the query": ("test_multi_head_attention", _mha_with(
        "k = self.w_k(key).reshape(B, Lk,", "k = self.w_k(value).reshape(B, Lk,")),
    "values taken from the key": ("test_multi_head_attention", _mha_with(
        "v = self.w_v(value)", "v = self.w_v(key)")),
    "fully masked query gives NaN": ("test_multi_head_attention", _mha_with(
        "torch.softmax(scores, dim=-1).nan_to_num(0.0)", "torch.softmax(scores, dim=-1)")),
    "fully masked query gets uniform weights": ("test_multi_head_attention", _mha_with(
        'torch.tensor(float("-inf"))', 'torch.tensor(-1e9)')),
    "bias ignored": ("test_multi_head_attention", _mha_with(
        "def __init__(self, d_model, num_heads, bias=True):", "def __init__(self, d_model, num_heads, bias=True):\n"
        "            bias = True")),
    # load_from_torch
    "queries and keys swapped": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_k, b_k), (module.w_k, w_q, b_q), (module.w_v, w_v, b_v),
                                    (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
            return module
    """),
    "weights transposed": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                    (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                    layer.weight.copy_(w.T); layer.bias.copy_(b)
            return module
    """),
    "biases not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            with torch.no_grad():
                for layer, w in [(module.w_q, w_q), (module.w_k, w_k), (module.w_v, w_v),
                                 (module.w_o, torch_mha.out_proj.weight)]:
                    layer.weight.copy_(w)
            return module
    """),
    "output projection not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
            return module
    """),
    "weights shared, not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                layer.weight.data = w.data; layer.bias.data = b.data
            return module
    """),
    "output projection shared, the rest copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
            module.w_o.weight.data = torch_mha.out_proj.weight.data
            module.w_o.bias.data = torch_mha.out_proj.bias.data
            return module
    """),
    "biases shared, weights copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                with torch.no_grad():
                    layer.weight.copy_(w)
                layer.bias.data = b.data
            return module
    """),
    "load_from_torch returning a new module": ("test_load_from_torch", """
        _solution_load = load_from_torch
        def load_from_torch(module, torch_mha):
            import copy
            return _solution_load(copy.deepcopy(module), torch_mha)
    """),
    "merge with the features of each head interleaved": ("test_merge_heads", """
        def merge_heads(x):
            B, H, L, d = x.shape
            return x.permute(0, 2, 3, 1).reshape(B, L, H * d)
    """),
    "split_heads returning float64": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.double().reshape(B, L, num_heads, D // num_heads).transpose(1, 2)
    """),
    "keys and values swapped": ("test_multi_head_attention", _mha_with(
        "k = self.w_k(key).reshape(B, Lk,", "k = self.w_k(value).reshape(B, Lk,").replace(
        "v = self.w_v(value)", "v = self.w_v(key)")),
}

ALTERNATIVES = {
    "the spelled-out module": ("test_multi_head_attention", _MHA),
    "a module that calls F.scaled_dot_product_attention for the output (allowed)": (
        "test_multi_head_attention", _mha_with(
            "out = (weights @ v).transpose(1, 2).reshape(B, Lq, D)",
            "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)\n"
            "            out = out.transpose(1, 2).reshape(B, Lq, D)")),
    "load_from_torch with state_dict slices": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            d = torch_mha.embed_dim
            state = {k: v.detach().clone() for k, v in torch_mha.state_dict().items()}
            with torch.no_grad():
                for i, name in enumerate(("w_q", "w_k", "w_v")):
                    getattr(module, name).weight.copy_(state["in_proj_weight"][i * d:(i + 1) * d])
                    getattr(module, name).bias.copy_(state["in_proj_bias"][i * d:(i + 1) * d])
                module.w_o.load_state_dict({"weight": state["out_proj.weight"], "bias": state["out_proj.bias"]})
            return module
    """),
}


# concept checks: wrong answers fail, the right answer in other forms passes
MISTAKES.update({
    "cross-attention weights of one head": ("test_concept_cross", "cross_attention_weights = 9 * 12"),
    "cross-attention weights with a square map": ("test_concept_cross", "cross_attention_weights = 4 * 12 * 12"),
    "cross-attention weights counting features": ("test_concept_cross", "cross_attention_weights = 9 * 12 * 32"),
    "parameters without the biases": ("test_concept_params", "mha_parameters = 4 * 64 * 64"),
    "parameters split across heads": ("test_concept_params", "mha_parameters = (4 * 64 * 64 + 4 * 64) // 8"),
    "parameters as if every head had full-width projections": ("test_concept_params",
                                                               "mha_parameters = 8 * 3 * 64 * 64 + 64 * 64"),
})
ALTERNATIVES.update({
    "cross-attention weights measured": ("test_concept_cross", """
        _layer = MultiHeadAttention(32, 4)
        cross_attention_weights = _layer(torch.zeros(1, 9, 32), torch.zeros(1, 12, 32), torch.zeros(1, 12, 32))[1].numel()
    """),
    "parameters counted from PyTorch's module": ("test_concept_params", """
        mha_parameters = sum(p.numel() for p in nn.MultiheadAttention(64, 8).parameters())
    """),
    "parameters as a numpy integer": ("test_concept_params", "mha_parameters = np.int64(16640)"),
})
