"""Lesson 7's Transformer explorer, driven from Python through its widgets."""
import numpy as np
import pytest
import torch
import torch.nn as nn

from course_utils.explorers.transformer import TransformerExplorer, induction_scores, induction_targets

SYMBOLS = [str(i) for i in range(10)]


def induction_model_maps(tokens):
    """Hand-made maps for a decoder-only model: layer 1 head 1 looks at the previous token,
    layer 2 head 2 is a perfect induction head, every other head is uniform over the past."""
    n = len(tokens)
    causal_uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    previous = torch.zeros(n, n)
    previous[torch.arange(n), (torch.arange(n) - 1).clamp(min=0)] = 1.0
    induction = causal_uniform.clone()
    for t, keys in enumerate(induction_targets(tokens)):
        if keys:
            induction[t] = 0.0
            induction[t, keys] = 1.0 / len(keys)
    return {"self-attention": (tokens, tokens, [torch.stack([previous, causal_uniform]),
                                                torch.stack([causal_uniform, induction])])}


def encoder_decoder_maps(tokens):
    """An encoder-decoder's three kinds of maps, from a real nn.MultiheadAttention (batch axis kept)."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    src = torch.randn(1, len(tokens), 8)
    tgt = torch.randn(1, len(tokens) + 1, 8)
    enc = mha(src, src, src, average_attn_weights=False)[1]
    dec = mha(tgt, tgt, tgt, average_attn_weights=False)[1]
    cross = mha(tgt, src, src, average_attn_weights=False)[1]
    out_labels = ["<bos>"] + list(reversed(tokens))
    return {"encoder self-attention": (tokens, tokens, [enc, enc]),
            "decoder self-attention": (out_labels, out_labels, [dec, dec]),
            "cross-attention": (out_labels, tokens, [cross, cross])}


def make(**kwargs):
    return TransformerExplorer({"induction": induction_model_maps, "reversal": encoder_decoder_maps},
                               {"induction": SYMBOLS, "reversal": list("abcd")},
                               examples={"induction": lambda rng: [str(t) for t in rng.permutation(10)[:5]] * 2},
                               max_len={"induction": 30, "reversal": 12}, **kwargs)


def test_induction_targets_and_scores():
    tokens = list("abcab")
    assert induction_targets(tokens) == [[], [], [], [1], [2]]
    perfect = np.zeros((1, 5, 5))
    perfect[0, 3, 1] = perfect[0, 4, 2] = 1.0
    uniform = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]
    scores = induction_scores(np.concatenate([perfect, uniform[None]]), tokens)
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx((1 / 4 + 1 / 5) / 2)
    assert induction_scores(uniform[None], list("abcde")) is None


def test_shows_the_chosen_layer_and_head(tmp_path):
    explorer = make()
    explorer.sequence.value = "1 2 3 4 1 2 3 4"
    assert explorer.tokens == "1 2 3 4 1 2 3 4".split()
    assert [v for _, v in explorer.layer.options] == [0, 1]
    assert [v for _, v in explorer.head.options] == [0, 1]
    assert explorer.weights.shape == (8, 8)
    assert explorer.weights[1:].argmax(1).tolist() == list(range(7))  # layer 1, head 1: the previous token
    explorer.layer.value = 1
    explorer.head.value = 1
    assert explorer.weights[4:].argmax(1).tolist() == [1, 2, 3, 4]
    assert explorer.scores[1] == pytest.approx(1.0)
    assert "head 2: 1.00" in explorer.message.value
    explorer.figure.savefig(tmp_path / "induction_head.png")


def test_induction_toggle_jumps_to_the_induction_head_and_outlines_it():
    explorer = make()
    explorer.sequence.value = "5 6 7 8 9 5 6 7 8 9"
    explorer.layer.value, explorer.head.value = 0, 0
    explorer.induction.value = True
    assert (explorer.kind.value, explorer.layer.value, explorer.head.value) == ("self-attention", 1, 1)
    outlined = [p for p in explorer.figure.axes[0].patches if p.get_edgecolor()[:3] != (0, 0, 0)]
    assert len(outlined) == 5  # one cell per query in the repeat
    explorer.head.value = 0  # with the toggle on, the menus stay free: another head, outlined too
    assert (explorer.layer.value, explorer.head.value) == (1, 0)
    assert explorer.scores[0] < 0.5
    explorer.sequence.value = "1 2 3 4 1 2 3 4"  # a new input while the toggle is on: jump again
    assert (explorer.layer.value, explorer.head.value) == (1, 1)
    explorer.sequence.value = "1 2 3 4"  # nothing repeats: a message, and the map stays
    assert "No token repeats" in explorer.message.value
    assert explorer.weights is not None


def test_encoder_decoder_kinds_and_shapes():
    explorer = make()
    explorer.model.value = "reversal"
    assert explorer.sequence.value.split() and set(explorer.sequence.value.split()) <= set("abcd")
    explorer.sequence.value = "a b c d a"
    kinds = [v for _, v in explorer.kind.options]
    assert kinds == ["encoder self-attention", "decoder self-attention", "cross-attention"]
    assert explorer.weights.shape == (5, 5)
    explorer.induction.value = True  # jumps to a self-attention head, then the kind can still be changed
    assert explorer.kind.value != "cross-attention"
    explorer.kind.value = "cross-attention"
    assert explorer.kind.value == "cross-attention"
    assert explorer.weights.shape == (6, 5)
    assert abs(explorer.weights.sum(1) - 1).max() < 1e-5
    assert explorer.scores is None  # induction scores only for self-attention
    explorer.kind.value = "decoder self-attention"
    assert explorer.weights.shape == (6, 6)


def test_random_example_button_uses_the_models_example():
    explorer = make()
    explorer.random_button.click()
    tokens = explorer.sequence.value.split()
    assert len(tokens) == 10 and tokens[:5] == tokens[5:]
    assert explorer.weights is not None


def test_bad_input_gives_a_message_not_a_traceback():
    explorer = make()
    for text, expected in [("", "Type an input"), ("1 2 x", "not in the alphabet"),
                           (" ".join(["1"] * 31), "at most 30")]:
        explorer.sequence.value = text
        assert expected in explorer.message.value, (text, explorer.message.value)
        assert explorer.weights is None


def test_unfinished_or_broken_model_function_gives_a_message():
    def unfinished(tokens):
        raise NotImplementedError("Exercise not done yet")

    def wrong_shape(tokens):
        return {"self-attention": (tokens, tokens, [torch.zeros(2, 3, 3)])}

    explorer = TransformerExplorer({"unfinished": unfinished, "wrong": wrong_shape}, SYMBOLS)
    assert "not finished" in explorer.message.value
    explorer.model.value = "wrong"
    assert "expected attention weights of shape" in explorer.message.value
    assert explorer.weights is None


def test_empty_models_is_an_error():
    with pytest.raises(ValueError, match="at least one model"):
        TransformerExplorer({}, SYMBOLS)
