"""Lesson 5's head explorer, driven from Python through its widgets."""
import torch
import torch.nn as nn

from course_utils.explorers.heads import HeadExplorer

SYMBOLS = "abcd"


def previous_and_mirror_maps(ids):
    """Hand-made maps: layer 1 has a 'previous' head and a 'mirror' head, layer 2 one uniform head."""
    n = ids.shape[1]
    previous = torch.zeros(n, n)
    previous[torch.arange(n), (torch.arange(n) - 1) % n] = 1.0
    mirror = torch.eye(n).flip(1)
    return [torch.stack([previous, mirror]), torch.full((1, n, n), 1.0 / n)]


def torch_model_maps(ids):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    h = torch.randn(1, ids.shape[1], 8)
    return [mha(h, h, h, average_attn_weights=False)[1]]  # (1, H, L, L): the explorer drops the batch axis


PATTERNS = {"previous": lambda n: [(t - 1) % n for t in range(n)], "mirror": lambda n: [n - 1 - t for t in range(n)]}


def make(**kwargs):
    return HeadExplorer({"hand-made": previous_and_mirror_maps, "torch": torch_model_maps}, SYMBOLS,
                        length=6, patterns=PATTERNS, **kwargs)


def test_shows_the_chosen_layer_and_head(tmp_path):
    explorer = make()
    explorer.sequence.value = "a b c d a b"
    assert explorer.tokens == list("abcdab")
    assert [v for _, v in explorer.layer.options] == [0, 1]
    assert [v for _, v in explorer.head.options] == [0, 1]
    assert explorer.weights.argmax(1).tolist() == [5, 0, 1, 2, 3, 4]
    assert "previous: 6/6" in explorer.message.value
    explorer.head.value = 1
    assert explorer.weights.argmax(1).tolist() == [5, 4, 3, 2, 1, 0]
    assert "mirror: 6/6" in explorer.message.value
    explorer.figure.savefig(tmp_path / "mirror_head.png")
    explorer.layer.value = 1  # one head only in layer 2: the head menu shrinks
    assert [v for _, v in explorer.head.options] == [0]
    assert explorer.head.value == 0
    assert abs(explorer.weights.sum() - 6) < 1e-5


def test_model_menu_switches_models_and_drops_the_batch_axis():
    explorer = make()
    explorer.model.value = "torch"
    assert len(explorer.all_weights) == 1
    assert explorer.all_weights[0].shape == (2, 6, 6)
    assert abs(explorer.weights.sum(1) - 1).max() < 1e-5


def test_random_example_button_gives_a_valid_example():
    explorer = make()
    before = explorer.sequence.value
    explorer.random_button.click()
    tokens = explorer.sequence.value.split()
    assert len(tokens) == 6 and set(tokens) <= set(SYMBOLS)
    assert explorer.weights is not None
    assert explorer.sequence.value != before or len(set(before.split())) == 1


def test_bad_input_gives_a_message_not_a_traceback():
    explorer = make()
    for text, expected in [("", "Type an example"), ("   ", "Type an example"),
                           ("a b z a b c", "not in the alphabet"), ("a b c", "exactly 6 symbols"),
                           ("a b c d a b c d", "exactly 6 symbols")]:
        explorer.sequence.value = text
        assert expected in explorer.message.value, (text, explorer.message.value)
        assert explorer.weights is None


def test_any_length_up_to_max_len_when_length_is_free():
    explorer = HeadExplorer({"hand-made": previous_and_mirror_maps}, SYMBOLS, length=None, max_len=5)
    explorer.sequence.value = "a b c"
    assert explorer.weights.shape == (3, 3)
    explorer.sequence.value = "a b c d a b"
    assert "At most 5" in explorer.message.value


def test_unfinished_or_broken_model_function_gives_a_message():
    def unfinished(ids):
        raise NotImplementedError("Exercise not done yet")

    def wrong_shape(ids):
        return [torch.zeros(2, 3, 3)]

    explorer = HeadExplorer({"unfinished": unfinished, "wrong": wrong_shape}, SYMBOLS, length=6)
    assert "not finished" in explorer.message.value
    explorer.model.value = "wrong"
    assert "expected attention weights of shape" in explorer.message.value
    assert explorer.weights is None


def test_empty_models_is_an_error():
    import pytest
    with pytest.raises(ValueError, match="at least one model"):
        HeadExplorer({}, SYMBOLS)
