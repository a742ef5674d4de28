"""Lesson 4's mask explorer, driven from Python through its widgets."""
import math

import numpy as np
import torch

from course_utils.explorers.masking import MaskExplorer, parse_lengths, parse_mask


def padding_mask(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


def causal_mask(length):
    return torch.ones(length, length, dtype=torch.bool).tril()


def masked_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(mask.any(-1, keepdim=True), weights, torch.zeros_like(weights))
    return weights @ v, weights


def unfinished(*args):
    raise NotImplementedError("Exercise not done yet")


def explorer(**kwargs):
    return MaskExplorer(kwargs.get("padding", padding_mask), kwargs.get("causal", causal_mask),
                        kwargs.get("attention", masked_attention), kwargs.get("lengths", "6 4 0"))


def test_padding_hides_padded_keys_and_renormalises(tmp_path):
    e = explorer()
    e.row.value = 1
    assert e.weights.shape == (3, 6, 6)
    assert np.all(e.weights[1][:, 4:] == 0)
    np.testing.assert_allclose(e.weights[1].sum(-1), 1.0, atol=1e-6)
    assert "sums to 1" in e.message.value
    e.figure.savefig(tmp_path / "padding.png")


def test_causal_toggle_and_both_masks():
    e = explorer(lengths="5 3")
    e.padding.value = False
    e.causal.value = True
    assert np.all(np.triu(e.weights[0], k=1) == 0) and np.all(np.diag(e.weights[0]) > 0)
    e.padding.value = True
    assert np.all(e.weights[1][:, 3:] == 0) and np.all(np.triu(e.weights[1], k=1) == 0)
    e.causal.value = False
    e.padding.value = False
    assert torch.all(e.mask)


def test_length_zero_gives_zero_rows_and_a_message():
    e = explorer()
    e.row.value = 2
    assert np.all(e.weights[2] == 0) and not np.isnan(e.weights).any()
    assert "length 0" in e.message.value
    e.lengths.value = "0 0"
    assert "nothing to attend to" in e.message.value and e.weights is None


def test_custom_mask_and_its_shape():
    e = explorer(lengths="3")
    e.custom.value = "100 110 000"
    assert np.all(e.weights[0][2] == 0) and e.weights[0][0, 0] == 1.0
    assert "every key masked" in e.message.value
    e.custom.value = "10 11"
    assert "shape" in e.message.value and e.weights is None
    e.custom.value = "1x1 111 111"
    assert "0 and 1" in e.message.value
    e.custom.value = ""
    assert e.weights is not None


def test_bad_lengths_show_messages():
    e = explorer()
    for text, words in [("", "Type"), ("a b", "whole numbers"), ("-1 3", "negative"), ("40", "at most"),
                        ("1 1 1 1 1 1 1 1 1", "At most 8")]:
        e.lengths.value = text
        assert words in e.message.value, (text, e.message.value)
        assert e.weights is None
    e.lengths.value = "2, 5"
    assert e.weights.shape == (2, 5, 5)
    assert e.row.options == ((("sequence 0", 0)), ("sequence 1", 1))


def test_unfinished_and_broken_student_functions():
    assert "padding_mask" in explorer(padding=unfinished).message.value
    e = explorer(causal=unfinished)
    assert e.weights is not None           # the causal mask is off by default
    e.causal.value = True
    assert "causal_mask" in e.message.value and e.weights is None
    assert "masked_attention" in explorer(attention=unfinished).message.value
    wrong_shape = explorer(padding=lambda lengths, max_len: torch.ones(max_len, dtype=torch.bool))
    assert "shape" in wrong_shape.message.value
    nan_weights = explorer(attention=lambda q, k, v, m: (v, torch.softmax(
        (q @ k.transpose(-2, -1)).masked_fill(~m, float("-inf")), -1)))
    assert "NaN" in nan_weights.message.value


def test_parsers():
    assert parse_lengths("3, 4 5") == [3, 4, 5]
    assert parse_mask("", 3) is None
    assert parse_mask("10 11", 2).tolist() == [[True, False], [True, True]]
