"""A small training loop and the evaluation used across the course."""
import math
import time

import torch
from tqdm.auto import tqdm

from .data import EOS, PAD
from .runtime import computes_on_cpu, is_fast_mode


def train_seq2seq(model, task, loss_fn, steps, batch_size=128, lr=3e-3, lengths=None,
                  same_length=True, device=None, clip=1.0, desc="training", progress=True):
    """Train `model` on fresh batches from `task` with Adam and a cosine learning rate.

    model(src, src_lengths, tgt_in) -> logits (B, Ly+1, vocab), teacher-forced.
    loss_fn(logits, tgt_out) -> scalar loss (the notebook passes its own).
    Returns a history dict: {"step": [...], "loss": [...], "seconds": float}.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive int, got {steps!r}")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn: expected a function (logits, targets) -> loss, got {type(loss_fn).__name__}")
    device = device or next(model.parameters()).device
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)) * 0.95 + 0.05)
    history = {"step": [], "loss": []}
    threads = torch.get_num_threads()
    if is_fast_mode() and computes_on_cpu(device):
        # Grading and CI: a second thread barely helps these small models on a quiet CPU, and
        # on a shared one (two kernels graded at once) it made a step several times slower.
        torch.set_num_threads(1)
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=0.5)
    try:
        for step in bar:
            batch = task.sample(batch_size, lengths, same_length).to(device)
            logits = model(batch.src, batch.src_lengths, batch.tgt_in)
            if logits.shape[:2] != batch.tgt_out.shape:
                raise ValueError(f"model output: expected logits of shape (B, Ly+1, vocab) with (B, Ly+1) = "
                                 f"{tuple(batch.tgt_out.shape)}, got {tuple(logits.shape)}")
            loss = loss_fn(logits, batch.tgt_out)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            schedule.step()
            history["step"].append(step)
            history["loss"].append(loss.item())
            if step % 20 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
    finally:
        torch.set_num_threads(threads)
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


def _check_ids(name, ids):
    if not torch.is_tensor(ids):
        raise TypeError(f"{name}: expected a torch tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != 2:
        raise ValueError(f"{name}: expected shape (batch, length), got {tuple(ids.shape)}")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"{name}: expected integer token ids, got dtype {ids.dtype}")


def trim_at_eos(ids):
    """(B, T) ids -> list of B lists, each cut before its first <eos> and without <pad>."""
    _check_ids("ids", ids)
    out = []
    for row in ids.tolist():
        row = row[: row.index(EOS)] if EOS in row else row
        out.append([t for t in row if t != PAD])
    return out


def exact_match(predictions, targets):
    """Per-example exact match of two (B, T) id tensors, compared up to <eos>.

    Padding and anything after <eos> are ignored, so a prediction matches
    only if it has the right tokens *and* stops in the right place.
    Returns a (B,) bool tensor.
    """
    _check_ids("predictions", predictions)
    _check_ids("targets", targets)
    if predictions.shape[0] != targets.shape[0]:
        raise ValueError(f"predictions, targets: expected the same batch size, got "
                         f"{predictions.shape[0]} and {targets.shape[0]}")
    if predictions.shape[0] == 0:
        raise ValueError("predictions: expected a non-empty batch, got 0 rows")
    ok = [p == t for p, t in zip(trim_at_eos(predictions), trim_at_eos(targets))]
    return torch.tensor(ok, dtype=torch.bool)


@torch.no_grad()
def evaluate_by_length(decode_fn, task, lengths, n=200, device="cpu"):
    """Held-out exact-match accuracy for each source length.

    decode_fn(src, src_lengths, max_len) -> (B, T) predicted ids (the notebook's
    own greedy decoder). Returns {length (int): accuracy (float in [0, 1])}.
    """
    if len(lengths) == 0:
        raise ValueError("lengths: expected at least one length, got none")
    result = {}
    for length in lengths:
        batch = task.held_out(int(length), n).to(device)
        predictions = decode_fn(batch.src, batch.src_lengths, batch.tgt_out.shape[1] + 1)
        result[int(length)] = exact_match(predictions.cpu(), batch.tgt_out.cpu()).float().mean().item()
    return result
