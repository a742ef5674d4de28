"""Lesson 2's alignment explorer, driven from Python: examples, typed sources, stepping, bad input."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils import BOS, EOS, ReversalTask  # noqa: E402
from course_utils.explorers.alignment import AlignmentExplorer, alignment_explorer  # noqa: E402


def reversing_decoder(src, src_lengths, max_len):
    """A perfect 'model': reverses the source and attends to the token it copies."""
    n = int(src_lengths[0])
    ids = src[0, :n].flip(0).tolist() + [EOS]
    weights = torch.zeros(1, len(ids), src.shape[1])
    for t in range(n):
        weights[0, t, n - 1 - t] = 1.0
    weights[0, n, 0] = 1.0
    return torch.tensor([ids]), weights


@pytest.fixture
def task():
    return ReversalTask(num_symbols=20, min_len=5, max_len=30, seed=0)


def test_starts_on_the_first_example_and_steps(task):
    explorer = alignment_explorer(task, reversing_decoder)
    assert explorer.weights is not None
    n = len(explorer.source_tokens)
    assert explorer.step_slider.max == n + 1  # n tokens and <eos>
    assert explorer.output_tokens[-1] == "<eos>"
    assert explorer.output_tokens[:-1] == explorer.expected_tokens
    assert "exact match" in explorer.message.value
    explorer.next_button.click()
    assert explorer.step_slider.value == 2
    assert "step 2" in explorer.render_figure().axes[0].get_title()
    explorer.set_step(100)
    assert explorer.step_slider.value == n + 1
    explorer.prev_button.click()
    assert explorer.step_slider.value == n
    explorer.set_step(-5)
    assert explorer.step_slider.value == 1


def test_dropdown_picks_another_example(task):
    explorer = AlignmentExplorer(task, reversing_decoder, lengths=(6, 10), per_length=2)
    assert len(explorer.example_dropdown.options) == 4
    explorer.set_step(3)
    explorer.example_dropdown.value = 2  # the first example of length 10
    assert len(explorer.source_tokens) == 10
    assert explorer.step_slider.value == 1 and explorer.step_slider.max == 11


def test_typed_source_is_decoded(task):
    explorer = alignment_explorer(task, reversing_decoder)
    explorer.source_text.value = "a b c d e f"
    explorer.decode_button.click()
    assert explorer.source_tokens == list("abcdef")
    assert explorer.output_tokens == list("fedcba") + ["<eos>"]
    assert explorer.weights.shape == (7, 6)
    explorer.set_step(2)
    assert "e" in explorer.tokens.value and "output so far" in explorer.tokens.value


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("   ", "empty"),
    ("a b c d zz", "not in the vocabulary"),
    ("a b <pad> c d", "not in the vocabulary"),
    (" ".join(["a"] * 31), "too long"),
    ("a b", "too short"),
])
def test_bad_typed_input_gives_a_message(task, text, words):
    explorer = alignment_explorer(task, reversing_decoder)
    assert explorer.decode_text(text) is False
    assert words in explorer.message.value.lower()
    assert explorer.weights is None and explorer.tokens.value == ""
    explorer.next_button.click()  # nothing to step through: no error
    assert explorer.render_figure() is None
    assert explorer.decode_text("a b c d e") is True  # and it recovers


def test_unfinished_exercise_gives_a_message(task):
    def unfinished(src, src_lengths, max_len):
        raise NotImplementedError("Exercise not done yet")
    explorer = alignment_explorer(task, unfinished)
    assert explorer.weights is None
    assert "not finished" in explorer.message.value


def test_wrong_weight_shape_gives_a_message(task):
    def wrong_shape(src, src_lengths, max_len):
        ids, weights = reversing_decoder(src, src_lengths, max_len)
        return ids, weights.transpose(1, 2)
    explorer = alignment_explorer(task, wrong_shape)
    assert explorer.weights is None
    assert "shape" in explorer.message.value


def test_nan_weights_give_a_message(task):
    def nan_weights(src, src_lengths, max_len):
        ids, weights = reversing_decoder(src, src_lengths, max_len)
        return ids, weights * float("nan")
    explorer = alignment_explorer(task, nan_weights)
    assert explorer.weights is None
    assert "NaN" in explorer.message.value


def test_wrong_output_is_marked(task):
    def wrong_first_token(src, src_lengths, max_len):
        ids, weights = reversing_decoder(src, src_lengths, max_len)
        ids[0, 0] = 3 if ids[0, 0] != 3 else 4
        return ids, weights
    explorer = alignment_explorer(task, wrong_first_token)
    assert "not an exact match" in explorer.message.value
    assert "#ffb3b3" in explorer.tokens.value  # the wrong token is shown in red


def test_output_without_eos_is_cut_at_max_len(task):
    def never_stops(src, src_lengths, max_len):
        ids = torch.full((1, max_len), 3)
        return ids, torch.softmax(torch.randn(1, max_len, src.shape[1]), -1)
    explorer = alignment_explorer(task, never_stops)
    n = len(explorer.source_tokens)
    assert explorer.step_slider.max == n + 2
    assert explorer.weights.shape == (n + 2, n)


def test_with_a_real_model(task):
    """The explorer runs a small untrained attention model end to end and renders its figure."""
    torch.manual_seed(0)
    emb, rnn, keys = torch.nn.Embedding(len(task.vocab), 8), torch.nn.GRUCell(8, 8), torch.nn.Linear(8, 8)
    out = torch.nn.Linear(16, len(task.vocab))

    def decode(src, src_lengths, max_len):
        annotations = keys(emb(src))
        hidden, token, ids, weights = torch.zeros(1, 8), torch.tensor([BOS]), [], []
        for _ in range(max_len):
            hidden = rnn(emb(token), hidden)
            w = torch.softmax(annotations[0] @ hidden[0], -1)
            token = out(torch.cat([hidden[0], w @ annotations[0]])).argmax(-1, keepdim=True)
            ids.append(int(token))
            weights.append(w)
        return torch.tensor([ids]), torch.stack(weights).unsqueeze(0)

    explorer = alignment_explorer(task, decode)
    assert explorer.weights is not None
    assert abs(explorer.weights.sum(-1) - 1).max() < 1e-5
    fig = explorer.render_figure()
    labels = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert labels == explorer.source_tokens
    assert fig.axes[1].get_xlabel().startswith("source") and fig.axes[1].get_ylabel().startswith("output")
