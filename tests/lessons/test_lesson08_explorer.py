"""Lesson 8's decoding timeline, driven from Python through its widgets."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.explorers.decoding_timeline import DecodingTimeline, fold_tiles


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def project(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).split(self.d_model, dim=-1)
        heads = lambda t: t.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        return heads(q), heads(k), heads(v)

    def merge(self, o):
        B, H, L, head_dim = o.shape
        return self.proj(o.transpose(1, 2).reshape(B, L, H * head_dim))

    def forward(self, x):
        q, k, v = self.project(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class KVCache:
    def __init__(self):
        self.k = self.v = None

    def update(self, k_new, v_new):
        if self.k is None:
            self.k, self.v = k_new, v_new
        else:
            self.k, self.v = torch.cat([self.k, k_new], 2), torch.cat([self.v, v_new], 2)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]


def cached_self_attention(layer, x_new, cache):
    q, k, v = layer.project(x_new)
    k, v = cache.update(k, v)
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(k.shape[2] - q.shape[2])
    weights = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)).masked_fill(~mask, -math.inf), -1)
    return layer.merge(weights @ v), weights


def online_softmax_update(m, s, block):
    m_new = torch.maximum(m, block.amax(-1))
    safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    return m_new, s * torch.exp(m - safe) + torch.exp(block - safe[..., None]).sum(-1)


def unfinished(*args):
    raise NotImplementedError("Exercise not done yet")


class UnfinishedCache(KVCache):
    def update(self, k_new, v_new):
        raise NotImplementedError


def explorer(**kwargs):
    return DecodingTimeline(CausalSelfAttention, kwargs.get("cache", KVCache),
                            kwargs.get("attention", cached_self_attention), kwargs.get("update", online_softmax_update))


def test_the_cache_grows_one_token_per_step_and_matches_recomputation(tmp_path):
    e = explorer()
    assert e.cache_lengths == list(range(1, 13))
    assert e.gap < 1e-5
    assert [w.shape for w in e.weights] == [(2, t + 1) for t in range(12)]
    for t in (0, 4, 11):
        e.step.value = t
        assert f"Step {t}:" in e.message.value and f"(1, 2, {t + 1}, 8)" in e.message.value
        assert "equals recomputing" in e.message.value
    e.figure.savefig(tmp_path / "timeline.png")


def test_tiles_follow_the_step_and_the_tile_size():
    e = explorer()
    e.step.value = 11
    e.tile_size.value = 4
    assert e.tiles.max == 3
    e.tiles.value = 3
    e.step.value = 3                      # four keys: one tile of 4
    assert e.tiles.max == 1 and e.tiles.value == 1
    e.tile_size.value = 1
    assert e.tiles.max == 4


def test_folding_every_tile_gives_the_softmax():
    e = explorer()
    e.step.value = 9
    e.tile_size.value = 3
    e.tiles.value = e.tiles.max
    assert "equal the softmax" in e.message.value
    scores = (e.keys[9][0] @ e.queries[9][0] / math.sqrt(8)).double()
    m, s = e.running
    assert m == pytest.approx(scores.max().item())
    assert s == pytest.approx(torch.exp(scores - scores.max()).sum().item())
    e.tiles.value = 1                     # one tile folded: the statistics of keys 0..2 only
    m1, s1 = e.running
    assert m1 == pytest.approx(scores[:3].max().item())
    assert "Tile 1 of 4" in e.message.value and "keys 0..2" in e.message.value


def test_head_dropdown_changes_the_picture():
    e = explorer()
    e.step.value = 8
    before = e.running
    e.head.value = 1
    assert e.running != before


def test_fold_tiles_with_a_short_last_tile():
    scores = torch.tensor([1.0, 5.0, 2.0, 7.0, 3.0], dtype=torch.float64)
    m, s = fold_tiles(online_softmax_update, scores, 2, 3)
    assert m == 7.0 and s == pytest.approx(torch.exp(scores - 7.0).sum().item())


def test_a_sum_that_is_not_rescaled_is_reported():
    def no_rescale(m, s, block):
        m_new = torch.maximum(m, block.amax(-1))
        return m_new, s + torch.exp(block - m_new[..., None]).sum(-1)

    e = explorer(update=no_rescale)
    e.tile_size.value = 1
    # a step whose newest query's largest score is not on key 0, so the max changes as tiles arrive
    e.step.value = next(t for t in range(11, 0, -1) if (e.keys[t][0] @ e.queries[t][0]).argmax() > 0)
    e.tiles.value = e.tiles.max
    assert "rescale" in e.message.value


def test_a_wrong_cache_order_is_reported():
    class FrontCache(KVCache):
        def update(self, k_new, v_new):
            if self.k is None:
                self.k, self.v = k_new, v_new
            else:
                self.k, self.v = torch.cat([k_new, self.k], 2), torch.cat([v_new, self.v], 2)
            return self.k, self.v

    def top_left(layer, x_new, cache):
        q, k, v = layer.project(x_new)
        k, v = cache.update(k, v)
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
        weights = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)).masked_fill(~mask, -math.inf), -1)
        return layer.merge(weights @ v), weights

    assert "differs from recomputing" in explorer(attention=top_left).message.value
    assert explorer(cache=FrontCache).gap < 1e-5  # one token per step: the order of keys cannot change the output


def test_unfinished_and_broken_student_code_shows_messages():
    e = explorer(cache=UnfinishedCache)
    assert "not finished" in e.message.value and e.figure is None
    e.step.value = 3                      # still a message, no traceback
    assert "not finished" in e.message.value
    assert "not finished" in explorer(attention=unfinished).message.value
    e = explorer(update=unfinished)
    assert "online_softmax_update" in e.message.value and e.figure is not None and e.running is None
    bad_shape = explorer(attention=lambda layer, x, cache: (x, torch.ones(3)))
    assert "shape" in bad_shape.message.value and bad_shape.weights is None


def test_weights_rows_sum_to_one():
    e = explorer()
    for w in e.weights:
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
