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
    """, "no gradient flows through your module"),
    # charged once: the later exercises are graded with reference pieces
    "split_heads reshaped straight to (B, H, L, d)": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, num_heads, L, D // num_heads)
    """, "without the transpose, so each head mixes several positions"),
    # split_heads / merge_heads
    "split without the transpose": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, num_heads, L, D // num_heads)
    """, "without the transpose, so each head mixes several positions"),
    "split with heads taking every H-th feature": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)
    """, "holds every H-th feature"),
    "merge without the transpose": ("test_merge_heads", """
        def merge_heads(x):
            B, H, L, d = x.shape
            return x.reshape(B, L, H * d)
    """, "reshaped straight to (B, L, H * d_head), without the transpose"),
    # MultiHeadAttention
    "heads reshaped without the transpose": ("test_multi_head_attention", _mha_with(
        "q = self.w_q(query).reshape(B, Lq, self.num_heads, self.head_dim).transpose(1, 2)",
        "q = self.w_q(query).reshape(B, self.num_heads, Lq, self.head_dim)").replace(
        "k = self.w_k(key).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "k = self.w_k(key).reshape(B, self.num_heads, Lk, self.head_dim)").replace(
        "v = self.w_v(value).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "v = self.w_v(value).reshape(B, self.num_heads, Lk, self.head_dim)"),
            "split by a reshape straight to (B, H, L, d_head)"),
    "heads merged without the transpose": ("test_multi_head_attention", _mha_with(
        "out = (weights @ v).transpose(1, 2).reshape(B, Lq, D)", "out = (weights @ v).reshape(B, Lq, D)"),
            "merged by a reshape straight to (B, L, d_model)"),
    "missing output projection": ("test_multi_head_attention", _mha_with(
        "return self.w_o(out), weights", "return out, weights"), "without the output projection"),
    "mask applied to the first head only": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))',
        'scores = torch.cat([torch.where(mask, scores[:, :1], torch.tensor(float("-inf"))), scores[:, 1:]], 1)'),
            "the mask reaches only head(s) 0;"),
    "mask applied to the last head only": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))',
        'scores = torch.cat([scores[:, :-1], torch.where(mask, scores[:, -1:], torch.tensor(float("-inf")))], 1)'),
            "the mask reaches only head(s) 2;"),
    "3-D mask broadcast over heads instead of batch": ("test_multi_head_attention", _mha_with(
        "if mask.dim() == 3:", "if False:"),
            ("works as (B, 1, 1, L_k) and raises as (B, L_q, L_k)", "give a 3-D mask a head axis")),
    "mask inverted": ("test_multi_head_attention", _mha_with(
        'torch.where(mask, scores,', 'torch.where(~mask, scores,'), "the mask is inverted"),
    "mask applied after the softmax": ("test_multi_head_attention", _mha_with(
        'scores = torch.where(mask, scores, torch.tensor(float("-inf")))', 'pass').replace(
        "weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)",
        "weights = torch.softmax(scores, dim=-1)\n"
        "            weights = weights * mask if mask is not None else weights"),
            "the mask was applied after the softmax"),
    "scaled by sqrt(d_model) instead of sqrt(head_dim)": ("test_multi_head_attention", _mha_with(
        "math.sqrt(self.head_dim)", "math.sqrt(self.d_model)"), "divided by sqrt(d_model)"),
    "no scale": ("test_multi_head_attention", _mha_with("/ math.sqrt(self.head_dim)", ""), "the scores are not scaled"),
    "softmax over the query axis": ("test_multi_head_attention", _mha_with(
        "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"), "the softmax runs over the queries"),
    "keys taken from the value": ("test_multi_head_attention", _mha_with(
        "k = self.w_k(key).reshape(B, Lk,", "k = self.w_k(value).reshape(B, Lk,"),
            "the keys are projected from `value`"),
    "values taken from the key": ("test_multi_head_attention", _mha_with(
        "v = self.w_v(value)", "v = self.w_v(key)"), "the values are projected from `key`"),
    "fully masked query gives NaN": ("test_multi_head_attention", _mha_with(
        "torch.softmax(scores, dim=-1).nan_to_num(0.0)", "torch.softmax(scores, dim=-1)"),
            "every key is masked gets NaN"),
    "fully masked query gets uniform weights": ("test_multi_head_attention", _mha_with(
        'torch.tensor(float("-inf"))', 'torch.tensor(-1e9)'), "every key is masked gets uniform weights"),
    "bias ignored": ("test_multi_head_attention", _mha_with(
        "def __init__(self, d_model, num_heads, bias=True):", "def __init__(self, d_model, num_heads, bias=True):\n"
        "            bias = True"), "bias=False) still has biases"),
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
    """, "w_q.weight holds W_K's weight"),
    "weights transposed": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                    (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                    layer.weight.copy_(w.T); layer.bias.copy_(b)
            return module
    """, "holds its block transposed"),
    "biases not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            with torch.no_grad():
                for layer, w in [(module.w_q, w_q), (module.w_k, w_k), (module.w_v, w_v),
                                 (module.w_o, torch_mha.out_proj.weight)]:
                    layer.weight.copy_(w)
            return module
    """, "w_q.bias still holds its initial value"),
    "output projection not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
            return module
    """, "w_o.weight still holds its initial value"),
    "weights shared, not copied": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                layer.weight.data = w.data; layer.bias.data = b.data
            return module
    """, ("every weight and bias of your module changed", "share memory")),
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
    """, ("your w_o (weight and bias) changed", "share memory")),
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
    """, ("your biases changed", "share memory")),
    "load_from_torch returning a new module": ("test_load_from_torch", """
        _solution_load = load_from_torch
        def load_from_torch(module, torch_mha):
            import copy
            return _solution_load(copy.deepcopy(module), torch_mha)
    """, "the module passed in is not filled"),
    "merge with the features of each head interleaved": ("test_merge_heads", """
        def merge_heads(x):
            B, H, L, d = x.shape
            return x.permute(0, 2, 3, 1).reshape(B, L, H * d)
    """, "the features of the heads are interleaved"),
    "split_heads returning float64": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.double().reshape(B, L, num_heads, D // num_heads).transpose(1, 2)
    """, "split_heads returned torch.float64"),
    "keys and values swapped": ("test_multi_head_attention", _mha_with(
        "k = self.w_k(key).reshape(B, Lk,", "k = self.w_k(value).reshape(B, Lk,").replace(
        "v = self.w_v(value)", "v = self.w_v(key)"), "the keys and the values are swapped"),
}

# More mistakes a student could make from the notebook alone (issue 55: at least five per exercise, each named)
MISTAKES.update({
    "split returning (B, L, H, d_head), the heads not moved in front": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, num_heads, D // num_heads)
    """, "not moved in front of the positions"),
    "split into heads of width num_heads": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, D // num_heads, num_heads).transpose(1, 2)
    """, "d_head heads of width num_heads"),
    "split folding the heads into the batch axis": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2).reshape(B * num_heads, L, -1)
    """, "folded into the batch axis"),
    "split with permute(0, 2, 3, 1)": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.reshape(B, L, num_heads, D // num_heads).permute(0, 2, 3, 1)
    """, "positions and features are swapped"),
    "merge with .view after the transpose": ("test_merge_heads", """
        def merge_heads(x):
            B, H, L, d = x.shape
            return x.transpose(1, 2).view(B, L, H * d)
    """, ("view()", "not contiguous")),
    "merge returning (B, L, H, d_head), the heads not joined": ("test_merge_heads", """
        def merge_heads(x):
            return x.transpose(1, 2)
    """, "moved next to the positions but not joined"),
    "merge averaging the heads": ("test_merge_heads", """
        def merge_heads(x):
            return x.mean(dim=1)
    """, "the heads are averaged"),
    "merge concatenating the heads along the positions": ("test_merge_heads", """
        def merge_heads(x):
            return torch.cat(x.unbind(1), dim=1)
    """, "joined along the positions"),
    "keys and values projected from the query (self-attention only)": ("test_multi_head_attention", _mha_with(
        "k = self.w_k(key).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "k = split_heads(self.w_k(query), self.num_heads)").replace(
        "v = self.w_v(value).reshape(B, Lk, self.num_heads, self.head_dim).transpose(1, 2)",
        "v = split_heads(self.w_v(query), self.num_heads)"), "keys are projected from `query`"),
    "scaled by head_dim instead of sqrt(head_dim)": ("test_multi_head_attention", _mha_with(
        "/ math.sqrt(self.head_dim)", "/ self.head_dim"), "divided by head_dim"),
    "weights averaged over the heads": ("test_multi_head_attention", _mha_with(
        "return self.w_o(out), weights", "return self.w_o(out), weights.mean(dim=1)"),
            "weights are averaged over the heads"),
    "no ValueError when num_heads does not divide d_model": ("test_multi_head_attention", _mha_with(
        "if d_model % num_heads:", "if False:"), ("without raising ValueError", "num_heads does not divide d_model")),
    "W_K and W_V swapped": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_v, w_k = torch_mha.in_proj_weight.chunk(3)
            b_q, b_v, b_k = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                    (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
            return module
    """, "w_k.weight holds W_V's weight"),
    "load_from_torch without the return": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            with torch.no_grad():
                for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                    (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                    layer.weight.copy_(w); layer.bias.copy_(b)
    """, "load_from_torch returned None"),
    "copy_ outside torch.no_grad()": ("test_load_from_torch", """
        def load_from_torch(module, torch_mha):
            w_q, w_k, w_v = torch_mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = torch_mha.in_proj_bias.chunk(3)
            for layer, w, b in [(module.w_q, w_q, b_q), (module.w_k, w_k, b_k), (module.w_v, w_v, b_v),
                                (module.w_o, torch_mha.out_proj.weight, torch_mha.out_proj.bias)]:
                layer.weight.copy_(w); layer.bias.copy_(b)
            return module
    """, "must run inside torch.no_grad()"),
})

ALTERNATIVES = {
    "the spelled-out module": ("test_multi_head_attention", _MHA),
    "split with chunk and stack": ("test_split_heads", """
        def split_heads(x, num_heads):
            return torch.stack(x.chunk(num_heads, dim=-1), dim=1)
    """),
    "split with view and permute": ("test_split_heads", """
        def split_heads(x, num_heads):
            B, L, D = x.shape
            return x.view(B, L, num_heads, -1).permute(0, 2, 1, 3)
    """),
    "merge with unbind and cat": ("test_merge_heads", """
        def merge_heads(x):
            return torch.cat(x.unbind(1), dim=-1)
    """),
    "merge with permute and flatten": ("test_merge_heads", """
        def merge_heads(x):
            return x.permute(0, 2, 1, 3).flatten(2)
    """),
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
    "cross-attention weights of one head": ("test_concept_cross", "cross_attention_weights = 9 * 12",
        "that is one head's map"),
    "cross-attention weights with a square map": ("test_concept_cross", "cross_attention_weights = 4 * 12 * 12",
        "that is a square map over the source"),
    "cross-attention weights counting features": ("test_concept_cross", "cross_attention_weights = 9 * 12 * 32",
        "that counts one weight per feature"),
    "cross-attention weights as a square map over the target": ("test_concept_cross",
                                                                "cross_attention_weights = 4 * 9 * 9",
                                                                    "that is a square map over the target"),
    "cross-attention weights times the head width": ("test_concept_cross", "cross_attention_weights = 8 * 9 * 12",
        "that multiplies by the head width"),
    "parameters without the biases": ("test_concept_params", "mha_parameters = 4 * 64 * 64", "leaves out the biases"),
    "parameters split across heads": ("test_concept_params", "mha_parameters = (4 * 64 * 64 + 4 * 64) // 8",
        "divides by the number of heads"),
    "parameters as if every head had full-width projections": ("test_concept_params",
                                                               "mha_parameters = 8 * 3 * 64 * 64 + 64 * 64",
                                                                   "gives every head full-width projections"),
    "parameters without the output projection": ("test_concept_params", "mha_parameters = 3 * 64 * 64 + 3 * 64",
        "leaves out the output projection W_O (64"),
    "parameters without the output projection or the biases": ("test_concept_params", "mha_parameters = 3 * 64 * 64",
        "leaves out the output projection W_O and the biases"),
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
