"""Lesson 11's kernel-grid explorer, driven from Python through its widgets (no Triton needed)."""
import math

import numpy as np
import pytest
import torch

from course_utils.explorers.kernel_grid import KernelGridExplorer, bytes_read, running_stats
from course_utils.kernels import key_tiles


def pytorch_forward(q, k, v, causal=False, block_q=16, block_k=16):
    """A correct stand-in for the student's flash_forward."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        L = q.shape[2]
        scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


def unfinished(*args, **kwargs):
    raise NotImplementedError


def test_the_schedule_skips_exactly_the_tiles_above_the_diagonal():
    assert key_tiles(64, 16, 16, False) == [[0, 16, 32, 48]] * 4
    assert key_tiles(64, 16, 16, True) == [[0], [0, 16], [0, 16, 32], [0, 16, 32, 48]]
    assert key_tiles(40, 16, 8, True) == [[0, 8], [0, 8, 16, 24], [0, 8, 16, 24, 32]]   # ends at min((t+1)16, 40)
    # bytes: each query row once, each visited key and value row once per program (d = 16, float32)
    assert bytes_read(32, 16, 16, False) == (32 + 2 * 2 * 32) * 16 * 4
    assert bytes_read(32, 16, 16, True) == (32 + 2 * (16 + 32)) * 16 * 4


def test_the_running_statistics_end_at_the_rows_max_and_sum():
    scores = np.array([0.5, 3.0, -1.0, 2.0, -np.inf])
    history = running_stats(scores, [0, 2, 4], 2)
    assert [m for m, _ in history] == [3.0, 3.0, 3.0]
    assert history[-1][1] == pytest.approx(np.exp(scores[:4] - 3.0).sum())
    assert history[0][1] == pytest.approx(np.exp(0.5 - 3.0) + 1.0)


def test_driving_the_explorer_every_control(tmp_path):
    e = KernelGridExplorer(pytorch_forward)
    assert e.student_gap < 1e-5 and "(equal)" in e.message.value
    for causal in (False, True):
        e.causal.value = causal
        for bq, bk in ((4, 8), (16, 4), (8, 8)):
            e.block_q.value, e.block_k.value = bq, bk
            e.program.value = e.program.max
            e.step.value = e.step.max
            m, s = e.history[-1]
            row = e.program.value * bq + e.row.value
            assert m == pytest.approx(float(np.max(e.scores[row])))
            assert "can now write o = acc / s" in e.message.value
            assert e.student_gap < 1e-5
    e.length.value = 20
    assert e.program.max == math.ceil(20 / e.block_q.value) - 1
    e.step.value = 1
    assert "tiles are still to come" in e.message.value or e.step.max == 1
    e.figure.savefig(tmp_path / "kernel_grid.png")


def test_an_unfinished_or_wrong_forward_gives_a_message_not_a_traceback():
    e = KernelGridExplorer(unfinished)
    assert "not finished yet" in e.message.value
    wrong = lambda q, k, v, **kw: (pytorch_forward(q, k, v, **kw)[0] * 2, None)
    e = KernelGridExplorer(wrong)
    assert e.student_gap > 0.1 and "check the masks" in e.message.value
