"""Lesson 3's attention explorer, driven from Python through its widgets."""
import numpy as np
import torch

from course_utils.explorers.attention import EXAMPLES, AttentionExplorer, reference_attention


def attention(q, k, v):
    """A correct attention function written out, standing in for the student's."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return weights @ v, weights


def unfinished(q, k, v):
    raise NotImplementedError("Exercise not done yet")


def test_reference_attention_matches_the_formula():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
    out, w = reference_attention(q, k, v)
    out2, w2 = attention(q, k, v)
    assert torch.allclose(w, w2, atol=1e-6) and torch.allclose(out, out2, atol=1e-6)


def test_it_attends_to_cat_or_milk_depending_on_the_adjective(tmp_path):
    explorer = AttentionExplorer(attention, sentence=EXAMPLES[0])
    tokens = explorer.tokens
    assert tokens[explorer.query.value] == "it"
    assert tokens[int(np.argmax(explorer.weights[explorer.query.value]))] == "cat"
    assert not explorer.used_reference
    explorer.figure.savefig(tmp_path / "tired.png")
    explorer.sentence.value = EXAMPLES[1]
    assert explorer.tokens[int(np.argmax(explorer.weights[explorer.query.value]))] == "milk"
    assert "milk" in explorer.message.value


def test_examples_menu_sets_the_sentence():
    explorer = AttentionExplorer(attention)
    explorer.examples.value = EXAMPLES[2]
    assert explorer.sentence.value == EXAMPLES[2]
    assert explorer.weights.shape == (len(explorer.tokens),) * 2


def test_query_menu_and_temperature():
    explorer = AttentionExplorer(attention)
    explorer.query.value = 4  # "drink"
    assert "drink" in explorer.message.value
    sharp_before = explorer.weights[4].max()
    explorer.temperature.value = 0.3
    assert explorer.weights[4].max() > sharp_before
    explorer.temperature.value = 4.0
    assert explorer.weights[4].max() < sharp_before
    np.testing.assert_allclose(explorer.weights.sum(-1), 1.0, atol=1e-6)


def test_runs_the_students_function():
    calls = []

    def uniform(q, k, v):
        calls.append(q.shape)
        w = torch.full((1, q.shape[1], k.shape[1]), 1.0 / k.shape[1])
        return w @ v, w

    explorer = AttentionExplorer(uniform)
    assert calls and calls[-1] == (1, len(explorer.tokens), 8)
    np.testing.assert_allclose(explorer.weights, 1.0 / len(explorer.tokens))


def test_falls_back_to_the_reference_with_a_note():
    explorer = AttentionExplorer(unfinished)
    assert explorer.used_reference
    assert "NotImplementedError" in explorer.message.value
    reference = AttentionExplorer(attention)
    np.testing.assert_allclose(explorer.weights, reference.weights, atol=1e-6)


def test_bad_inputs_show_messages_not_tracebacks():
    explorer = AttentionExplorer(attention)
    explorer.sentence.value = ""
    assert "empty" in explorer.message.value and explorer.weights is None
    explorer.sentence.value = "   "
    assert "empty" in explorer.message.value
    explorer.sentence.value = "the zebra drank the milk"
    assert "zebra" in explorer.message.value and explorer.weights is None
    explorer.sentence.value = " ".join(["the cat"] * 15)
    assert "at most" in explorer.message.value
    explorer.sentence.value = "The cat, the milk."
    assert explorer.tokens == ["the", "cat", "the", "milk"] and explorer.weights is not None


def test_a_broken_student_function_shows_its_error():
    def wrong_shape(q, k, v):
        return v, torch.ones(3, 3)

    def crashes(q, k, v):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    explorer = AttentionExplorer(wrong_shape)
    assert "shape" in explorer.message.value and explorer.weights is None
    explorer = AttentionExplorer(crashes)
    assert "RuntimeError" in explorer.message.value and explorer.weights is None
