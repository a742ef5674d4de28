"""Lesson 4's hidden tests catch the common mistakes and pass other correct answers.

Each case takes a test cell's source from solutions/04_masking.ipynb,
runs it after the set-up cell and the solution cells, with one answer replaced
by a mistaken version, and expects it to fail.
"""


LESSON = "04_masking"


ALTERNATIVES = {
    "masked_attention with nan_to_num": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
            if mask is not None:
                scores = torch.where(mask, scores, torch.tensor(float("-inf")))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return torch.einsum("...qk,...kd->...qd", weights, v), weights
    """),
    "masked_attention with a large negative number and zeroed rows": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            if mask is None:
                mask = torch.ones_like(scores, dtype=torch.bool)
            weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1) * mask
            weights = weights * mask.any(-1, keepdim=True)
            return weights @ v, weights
    """),
    "causal_mask by comparing positions": ("test_causal_mask", """
        def causal_mask(length):
            i = torch.arange(length)
            return i[None, :] <= i[:, None]
    """),
    "padding_mask with a loop": ("test_padding_mask", """
        def padding_mask(lengths, max_len):
            m = torch.zeros(len(lengths), max_len, dtype=torch.bool)
            for b, n in enumerate(lengths.tolist()):
                m[b, :n] = True
            return m
    """),
}


MISTAKES = {
    "padding_mask off by one": ("test_padding_mask", """
        def padding_mask(lengths, max_len):
            return torch.arange(max_len)[None, :] <= lengths[:, None]
    """),
    "padding_mask inverted": ("test_padding_mask", """
        def padding_mask(lengths, max_len):
            return torch.arange(max_len)[None, :] >= lengths[:, None]
    """),
    "causal_mask without the diagonal": ("test_causal_mask", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).tril(diagonal=-1)
    """),
    "causal_mask one too many": ("test_causal_mask", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).tril(diagonal=1)
    """),
    "causal_mask transposed": ("test_causal_mask", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).triu()
    """),
    "causal_mask inverted": ("test_causal_mask", """
        def causal_mask(length):
            return ~torch.ones(length, length, dtype=torch.bool).tril()
    """),
    "causal_mask as floats": ("test_causal_mask", """
        def causal_mask(length):
            return torch.ones(length, length).tril()
    """),
    "attention_mask padding the query rows": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, :, None]
            if causal:
                mask = mask & causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """),
    "attention_mask combined with or": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :]
            if causal:
                mask = mask | causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """),
    "attention_mask not expanded": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :]
            return mask & causal_mask(max_len) if causal else mask
    """),
    "attention_mask ignoring causal": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            return padding_mask(lengths, max_len)[:, None, :].expand(len(lengths), max_len, max_len)
    """),
    "masked_attention with the mask after the softmax": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            if mask is not None:
                weights = weights * mask
            return weights @ v, weights
    """),
    "masked_attention with an inverted mask": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return weights @ v, weights
    """),
    "masked_attention that leaves NaN in empty rows": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """),
    "masked_attention with -1e9 and uniform empty rows": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, -1e9)
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """),
    "masked_attention without the scale": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return weights @ v, weights
    """),
    "masked_attention with the softmax over the queries": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
            return weights @ v, weights
    """),
    "to_mha_masks without negation": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return padding_mask(lengths, max_len), (causal_mask(max_len) if causal else None)
    """),
    "to_mha_masks negating only the padding": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return ~padding_mask(lengths, max_len), (causal_mask(max_len) if causal else None)
    """),
    "to_mha_masks with float masks": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            kpm = torch.zeros(len(lengths), max_len).masked_fill(~padding_mask(lengths, max_len), float("-inf"))
            am = torch.zeros(max_len, max_len).masked_fill(~causal_mask(max_len), float("-inf")) if causal else None
            return kpm, am
    """),
}
