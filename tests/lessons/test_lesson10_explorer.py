"""Lesson 10's recall explorer, driven from Python through its widgets.

The recall models and the training loop are the notebook's own cells (solutions/10_linear_attention.ipynb),
run here with a few training steps: the explorer's mechanics do not depend on how well they learned.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.explorers.recall import RecallExplorer
from tests.nbtools import SOLUTIONS, load


def elu_plus_one(x):
    return F.elu(x) + 1


def linear_attention_step(S, z, q_t, k_t, v_t):
    phi_q, phi_k = elu_plus_one(q_t), elu_plus_one(k_t)
    S_new, z_new = S + phi_k[..., :, None] * v_t[..., None, :], z + phi_k
    return (phi_q[..., :, None] * S_new).sum(-2) / (phi_q * z_new).sum(-1, keepdim=True), S_new, z_new


def unfinished(*args):
    raise NotImplementedError("Exercise not done yet")


@pytest.fixture(scope="module")
def models():
    nb = load(SOLUTIONS / "10_linear_attention.ipynb")
    source = next(c.source for c in nb.cells if c.cell_type == "code" and "class RecallModel" in c.source)
    namespace = {}
    exec("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport course_utils as cu\n"
         "from course_utils.mqar import recall_batch\ndevice = torch.device('cpu')\n", namespace)
    namespace["elu_plus_one"] = elu_plus_one
    exec(source, namespace)
    train = namespace["train_recall"]
    return {"softmax, d_k=8": train("softmax", 8, 20), "linear, d_k=8": train("linear", 8, 20),
            "gated, d_k=8": train("gated", 8, 5), "delta, d_k=8": train("delta", 8, 5)}


def explorer(models, step=linear_attention_step):
    return RecallExplorer(models, step, elu_plus_one)


def test_linear_state_is_built_with_the_students_step_and_equals_the_models(models, tmp_path):
    e = explorer(models)
    assert e.memory.value == "linear, d_k=8"
    r = e.result
    assert r["state_gap"] is not None and r["state_gap"] < 1e-4
    assert "equal to the model" in e.message.value and "queries answered right" in e.message.value
    assert r["weights"].shape == (8, 8)
    np.testing.assert_allclose(r["weights"].sum(-1), 1.0, atol=1e-5)
    e.figure.savefig(tmp_path / "recall.png")


def test_pairs_and_example_change_the_picture(models):
    e = explorer(models)
    e.pairs.value = 20
    assert e.result["weights"].shape == (20, 20) and len(e.result["right"]) == 20
    before = e.result["keys"]
    e.example.value = 3
    assert e.result["keys"] != before


def test_every_memory_can_be_chosen(models):
    e = explorer(models)
    for name in models:
        e.memory.value = name
        assert e.result is not None and e.figure is not None, name
        assert (e.result["state_gap"] is None) == (models[name].kind != "linear")
        assert f"{int(e.result['right'].sum())} of {e.pairs.value} queries" in e.message.value
    e.memory.value = "softmax, d_k=8"
    np.testing.assert_allclose(e.result["weights"].sum(-1), 1.0, atol=1e-5)


def test_confused_keys_are_stored_keys_whose_value_came_back(models):
    e = explorer(models)
    e.pairs.value = 40                    # more pairs than a 8-wide state holds: wrong answers
    r = e.result
    assert not r["right"].all()
    confused = [(i, c) for i, c in enumerate(r["confused"]) if c is not None]
    assert confused, "a crowded state should give some query another key's value"
    for i, key in confused:
        assert key in r["keys"] and key != r["queries"][i]
        assert r["values"][r["keys"].index(key)] == r["predicted"][i] != r["answers"][i]
    for i, ok in enumerate(r["right"]):
        assert ok == (r["predicted"][i] == r["answers"][i])
        if ok:
            assert r["confused"][i] is None
    assert "confused" in e.message.value or "another stored key" in e.message.value


def test_unfinished_or_wrong_step_shows_a_message_not_a_traceback(models):
    e = explorer(models, step=unfinished)
    assert "not finished" in e.message.value and e.figure is None and e.result is None
    e.pairs.value = 5                     # still a message
    assert "not finished" in e.message.value
    e.memory.value = "softmax, d_k=8"     # the other memories do not need the exercise
    assert e.result is not None and e.figure is not None

    def raw_keys(S, z, q_t, k_t, v_t):     # forgets the feature map when writing S
        S_new, z_new = S + k_t[:, None] * v_t[None, :], z + elu_plus_one(k_t)
        return v_t, S_new, z_new

    wrong = explorer(models, step=raw_keys)
    assert "differs from the model" in wrong.message.value and wrong.result["state_gap"] > 1e-3

    bad_shape = explorer(models, step=lambda S, z, q, k, v: (v, S, z[..., :1]))
    assert "shape" in bad_shape.message.value and bad_shape.result is None
