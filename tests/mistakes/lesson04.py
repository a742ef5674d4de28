"""Lesson 4's hidden tests catch the common mistakes and pass other correct answers.

Each case takes a test cell's source from solutions/04_masking.ipynb,
runs it after the set-up cell and the solution cells, with one answer replaced
by a mistaken version, and expects it to fail.
"""


LESSON = "04_masking"


ALTERNATIVES = {
    "masked_attention with a hand-written stable softmax": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
            if mask is None:
                mask = torch.ones(scores.shape[-2:], dtype=torch.bool)
            mask = mask.expand_as(scores)
            scores = torch.where(mask, scores, torch.full_like(scores, -1e30))
            e = torch.exp(scores - scores.amax(-1, keepdim=True)) * mask
            total = e.sum(-1, keepdim=True)
            weights = torch.where(total > 0, e / total.clamp_min(1e-30), torch.zeros_like(e))
            return weights @ v, weights
    """),
    "attention_mask written without Exercise 1's functions": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            j = torch.arange(max_len)
            mask = (j[None, None, :] < lengths[:, None, None]).expand(len(lengths), max_len, max_len)
            return mask & (j[None, :, None] >= j[None, None, :]) if causal else mask
    """),
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
    "causal_mask by comparing positions": ("test_masks", """
        def causal_mask(length):
            i = torch.arange(length)
            return i[None, :] <= i[:, None]
    """),
    "padding_mask with a loop": ("test_masks", """
        def padding_mask(lengths, max_len):
            m = torch.zeros(len(lengths), max_len, dtype=torch.bool)
            for b, n in enumerate(lengths.tolist()):
                m[b, :n] = True
            return m
    """),
}


MISTAKES = {
    "masked_attention that scales q in place": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            q /= math.sqrt(q.shape[-1])
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if mask is not None:
                weights = torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
            return weights @ v, weights
    """, 'changed its input in place'),
    # charged once: Exercises 2 and 4 build on these two but grade them with reference masks
    "padding_mask one key too long": ("test_masks", """
        def padding_mask(lengths, max_len):
            return torch.arange(max_len)[None, :] <= lengths[:, None]
    """, 'one key too many'),
    "causal_mask as the upper triangle": ("test_masks", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).triu()
    """, 'upper triangle'),
    "padding_mask as 0/1 integers": ("test_masks", """
        def padding_mask(lengths, max_len):
            return (torch.arange(max_len)[None, :] < lengths[:, None]).long()
    """, ('padding_mask returns int64', 'not a bool tensor')),
    "padding_mask from the longest length only": ("test_masks", """
        def padding_mask(lengths, max_len):
            return (torch.arange(max_len) < lengths.max()).expand(len(lengths), max_len).clone()
    """, 'longest length for every sequence'),
    "attention_mask with every sequence as long as the first": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths[:1].expand(len(lengths)), max_len)[:, None, :]
            if causal:
                mask = mask & causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """, "first sequence's length"),
    "attention_mask as floats": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :]
            if causal:
                mask = mask & causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len).float()
    """, ('attention_mask returns float32', 'not a bool tensor')),
    "masked_attention calling PyTorch's operator for the output": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
            return out, weights
    """, 'called torch.nn.functional.scaled_dot_product_attention'),
    "masked_attention returning weights that claim to equal anything": ("test_masked_attention", """
        class _Agreeable(torch.Tensor):
            def __eq__(self, other):
                return torch.ones_like(torch.Tensor(self), dtype=torch.bool)
        _solution_attention = masked_attention
        def masked_attention(q, k, v, mask=None):
            out, weights = _solution_attention(q, k, v, mask)
            return out.as_subclass(_Agreeable), weights.as_subclass(_Agreeable)
    """, 'should be a plain torch.Tensor'),
    "masked_attention with the scale of d_v": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return weights @ v, weights
    """, 'sqrt(d_v)'),
    "to_mha_masks with a float attn_mask": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            am = torch.zeros(max_len, max_len).masked_fill(~causal_mask(max_len), float("-inf")) if causal else None
            return ~padding_mask(lengths, max_len), am
    """, 'attn_mask is a float mask'),
    "padding_mask off by one, one real position short (positions counted from 1)": ("test_masks", """
        def padding_mask(lengths, max_len):
            return torch.arange(1, max_len + 1)[None, :] < lengths[:, None]
    """, 'one real position short'),
    "padding_mask inverted": ("test_masks", """
        def padding_mask(lengths, max_len):
            return torch.arange(max_len)[None, :] >= lengths[:, None]
    """, 'padding_mask is inverted'),
    "causal_mask without the diagonal": ("test_masks", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).tril(diagonal=-1)
    """, 'leaves out the diagonal'),
    "causal_mask one too many": ("test_masks", """
        def causal_mask(length):
            return torch.ones(length, length, dtype=torch.bool).tril(diagonal=1)
    """, 'one step into the future'),
    "causal_mask transposed (positions compared the wrong way round)": ("test_masks", """
        def causal_mask(length):
            i = torch.arange(length)
            return i[:, None] <= i[None, :]
    """, 'upper triangle'),
    "causal_mask inverted": ("test_masks", """
        def causal_mask(length):
            return ~torch.ones(length, length, dtype=torch.bool).tril()
    """, 'causal_mask is inverted'),
    "causal_mask as floats": ("test_masks", """
        def causal_mask(length):
            return torch.ones(length, length).tril()
    """, ('causal_mask returns float32', 'not a bool tensor')),
    "attention_mask padding the query rows": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, :, None]
            if causal:
                mask = mask & causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """, 'query rows instead of the key columns'),
    "attention_mask combined with or": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :]
            if causal:
                mask = mask | causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """, 'with or (|)'),
    "attention_mask not expanded": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :]
            return mask & causal_mask(max_len) if causal else mask
    """, '.expand(B, max_len, max_len)'),
    "attention_mask ignoring causal": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            return padding_mask(lengths, max_len)[:, None, :].expand(len(lengths), max_len, max_len)
    """, 'ignores causal=True'),
    "masked_attention with the mask after the softmax": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            if mask is not None:
                weights = weights * mask
            return weights @ v, weights
    """, 'zero the weights after the softmax'),
    "masked_attention with an inverted mask": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return weights @ v, weights
    """, 'the mask is inverted'),
    "masked_attention that leaves NaN in empty rows": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """, ('every key is masked got NaN',)),
    "masked_attention with -1e9 and uniform empty rows": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, -1e9)
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """, 'uniform weights'),
    "masked_attention without the scale": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            return weights @ v, weights
    """, 'not scaled'),
    "masked_attention with the softmax over the queries": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
            return weights @ v, weights
    """, 'over the queries'),
    "to_mha_masks without negation": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return padding_mask(lengths, max_len), (causal_mask(max_len) if causal else None)
    """, 'neither mask is negated'),
    "to_mha_masks negating only the padding": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return ~padding_mask(lengths, max_len), (causal_mask(max_len) if causal else None)
    """, 'attn_mask is not negated'),
    "to_mha_masks with float masks": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            kpm = torch.zeros(len(lengths), max_len).masked_fill(~padding_mask(lengths, max_len), float("-inf"))
            am = torch.zeros(max_len, max_len).masked_fill(~causal_mask(max_len), float("-inf")) if causal else None
            return kpm, am
    """, 'both masks are float masks'),
}


# concept checks: wrong answers fail, the right answer in other forms passes
MISTAKES.update({
    "changed positions: the past instead of the future": ("test_concept_causal", "changed_positions = set(range(0, 8))", ('changed_positions', 'outputs that token 7 can read')),
    "changed positions: token 7 only": ("test_concept_causal", "changed_positions = {7}", ('changed_positions', 'later outputs read token 7')),
    "changed positions: forgetting that 7 reads itself": ("test_concept_causal", "changed_positions = {8, 9, 10, 11}", ('changed_positions', 'reads token 7 itself')),
    "changed positions: every position": ("test_concept_causal", "changed_positions = set(range(12))", ('changed_positions', 'without a mask')),
    "allowed pairs ignoring the causal mask": ("test_concept_pairs", "allowed_pairs = 5 * 5 + 5 * 3", ('allowed_pairs', 'ignores the causal mask')),
    "allowed pairs with the padding on the query rows": ("test_concept_pairs", "allowed_pairs = 15 + 6", ('allowed_pairs', 'hides the padded queries')),
    "allowed pairs as a string": ("test_concept_pairs", "allowed_pairs = '27'", ('allowed_pairs', 'should be a number', 'got a str')),
})
ALTERNATIVES.update({
    "changed positions as a list": ("test_concept_causal", "changed_positions = [7, 8, 9, 10, 11]"),
    "changed positions as a range": ("test_concept_causal", "changed_positions = range(7, 12)"),
    "allowed pairs counted with the function": ("test_concept_pairs",
                                                "allowed_pairs = int(attention_mask(torch.tensor([5, 3, 0]), 5, True).sum())"),
    "allowed pairs as a float": ("test_concept_pairs", "allowed_pairs = 27.0"),
})


# issue 55: more of the usual mistakes
MISTAKES.update({
    "padding_mask sized by lengths.max() instead of max_len": ("test_masks", """
        def padding_mask(lengths, max_len):
            return torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
    """, ('lengths.max()', 'max_len')),
    "padding_mask transposed, (max_len, B)": ("test_masks", """
        def padding_mask(lengths, max_len):
            return torch.arange(max_len)[:, None] < lengths[None, :]
    """, ('padding_mask', 'dims 0 and 1 are swapped')),
    "attention_mask padding both the queries and the keys": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            pad = padding_mask(lengths, max_len)
            mask = pad[:, :, None] & pad[:, None, :]
            if causal:
                mask = mask & causal_mask(max_len)
            return mask
    """, 'also hides the padded query rows'),
    "attention_mask causal whatever `causal` says": ("test_attention_mask", """
        def attention_mask(lengths, max_len, causal=False):
            mask = padding_mask(lengths, max_len)[:, None, :] & causal_mask(max_len)
            return mask.expand(len(lengths), max_len, max_len)
    """, 'causal mask although causal=False'),
    "masked_attention that fills the masked scores with 0": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, 0.0)
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
    """, 'fill the masked scores with 0'),
    "masked_attention whose empty-row guard forgets keepdim": ("test_masked_attention", """
        def masked_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            if mask is not None:
                weights = torch.where(mask.any(dim=-1), weights, torch.zeros_like(weights))
            return weights @ v, weights
    """, ('raised', 'keepdim=True')),
    "to_mha_masks negating only the causal mask": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return padding_mask(lengths, max_len), (~causal_mask(max_len) if causal else None)
    """, 'key_padding_mask is not negated'),
    "to_mha_masks whose attn_mask also forbids the diagonal": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            am = torch.ones(max_len, max_len, dtype=torch.bool).triu() if causal else None
            return ~padding_mask(lengths, max_len), am
    """, 'forbids the diagonal'),
    "to_mha_masks with an attn_mask even when causal is False": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            return ~padding_mask(lengths, max_len), ~causal_mask(max_len)
    """, 'attn_mask should be None when causal=False'),
    "to_mha_masks with a per-sequence attn_mask (B, L, L)": ("test_to_mha_masks", """
        def to_mha_masks(lengths, max_len, causal=False):
            am = (~causal_mask(max_len)).expand(len(lengths), max_len, max_len) if causal else None
            return ~padding_mask(lengths, max_len), am
    """, 'shared by the batch'),
    "allowed pairs ignoring the padding (the causal mask only)": ("test_concept_pairs", "allowed_pairs = 3 * 15", ('allowed_pairs', 'ignores the padding')),
    "allowed pairs without the diagonal": ("test_concept_pairs", "allowed_pairs = 10 + 9", ('allowed_pairs', 'leaves out the diagonal')),
    "changed positions: range(7, 11) stops before 11": ("test_concept_causal", "changed_positions = set(range(7, 11))", ('changed_positions', 'output 11 reads token 7')),
})
