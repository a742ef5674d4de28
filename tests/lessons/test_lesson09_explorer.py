"""Lesson 9's backward-pass explorer, driven from Python through its widgets."""
import math

import numpy as np
import pytest
import torch

from course_utils.explorers.flash_backward import FlashBackwardExplorer, reference, tile_order


def flash_backward(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    """The lesson's recipe: key blocks outside, query blocks inside, weights recomputed from the log-sum-exp."""
    L_q, L_k, d = q.shape[2], k.shape[2], q.shape[3]
    D = (grad_o * o).sum(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0 in range(0, L_k, block_k):
        for i0 in range(0, L_q, block_q):
            s = q[:, :, i0:i0 + block_q] @ k[:, :, j0:j0 + block_k].transpose(-2, -1) / math.sqrt(d)
            if causal:
                keys = torch.arange(j0, j0 + s.shape[-1])[None, :]
                s = s.masked_fill(keys > torch.arange(i0, i0 + s.shape[-2])[:, None] + L_k - L_q, float("-inf"))
            p = torch.exp(s - lse[:, :, i0:i0 + block_q, None])
            do = grad_o[:, :, i0:i0 + block_q]
            dv[:, :, j0:j0 + block_k] += p.transpose(-2, -1) @ do
            ds = p * (do @ v[:, :, j0:j0 + block_k].transpose(-2, -1) - D[:, :, i0:i0 + block_q, None]) / math.sqrt(d)
            dq[:, :, i0:i0 + block_q] += ds @ k[:, :, j0:j0 + block_k]
            dk[:, :, j0:j0 + block_k] += ds.transpose(-2, -1) @ q[:, :, i0:i0 + block_q]
    return dq, dk, dv


def without_lse_shift(q, k, v, o, lse, grad_o, causal=False, block_q=64, block_k=64):
    return flash_backward(q, k, v, o, torch.zeros_like(lse), grad_o, causal, block_q, block_k)


def unfinished(*args, **kwargs):
    raise NotImplementedError


def test_every_tile_done_gives_autograds_gradients(tmp_path):
    e = FlashBackwardExplorer(flash_backward)
    for causal in (True, False):
        e.causal.value = causal
        for block in (2, 3, 4, 6):
            e.block.value = block
            e.step.value = e.step.max
            for partial, want in zip(e.partial, e.want):
                torch.testing.assert_close(partial, want)
            assert "Every tile done" in e.message.value
            assert e.student_gap < 1e-10 and "(equal)" in e.message.value
            assert not np.isnan(e.weights.numpy()[np.tril_indices(12)]).any()
    e.figure.savefig(tmp_path / "flash_backward.png")


def test_the_tiles_follow_the_block_and_the_mask():
    assert len(tile_order(12, 4, False)) == 9
    causal = tile_order(12, 4, True)
    assert len(causal) == 9 and sum(skip for _, _, skip in causal) == 3    # the three tiles above the diagonal
    assert [(i0, j0) for i0, j0, _ in causal[:3]] == [(0, 0), (4, 0), (8, 0)]   # key blocks outside
    e = FlashBackwardExplorer(flash_backward)
    e.block.value = 3
    assert e.step.max == 16
    e.step.value = 5                      # key block 3..5 against query block 0..2: wholly in the future
    assert "skipped" in e.message.value and "3..5" in e.message.value


def test_a_partial_replay_is_not_yet_the_gradient():
    e = FlashBackwardExplorer(flash_backward)
    e.block.value = 4
    e.step.value = 1
    assert "rows still waiting" in e.message.value
    weights = e.weights.numpy()
    assert not np.isnan(weights[:4, :4]).all() and np.isnan(weights[4:, :]).all()
    # the first tile's weights are the softmax's, restricted to it (rows of a causal tile sum to at most one)
    assert (np.nansum(weights[:4, :4], axis=1) <= 1 + 1e-9).all()


def test_a_backward_without_the_lse_shift_is_reported():
    e = FlashBackwardExplorer(without_lse_shift)
    assert e.student_gap > 1e-3 and "log-sum-exp shift" in e.message.value


def test_unfinished_or_broken_student_code_shows_a_message():
    e = FlashBackwardExplorer(unfinished)
    assert "not finished" in e.message.value and e.figure is not None
    e.step.value = e.step.max
    assert "Every tile done" in e.message.value
    broken = FlashBackwardExplorer(lambda *a, **k: (torch.zeros(3),))
    assert "Error" in broken.message.value or "error" in broken.message.value


def test_reference_is_autograd_of_attention():
    gen = torch.Generator().manual_seed(1)
    q, k, v, g = (torch.randn(5, 3, generator=gen, dtype=torch.float64) for _ in range(4))
    o, lse, grads = reference(q, k, v, g, causal=False)
    torch.testing.assert_close(o, torch.softmax(q @ k.T / math.sqrt(3), -1) @ v)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.T / math.sqrt(3), -1))
    assert len(grads) == 3 and all(t.shape == (5, 3) for t in grads)
