"""Lesson 9's two measurements, repeated: a training step's memory and time, and decode throughput by batch size.

    python benchmarks/lesson09_batching.py                        # both, the notebook's sizes, 5 runs each
    python benchmarks/lesson09_batching.py --only throughput --contexts 128 512 --batches 1 4 16 64

It runs the code of solutions/09_flash_backward_and_batching.ipynb (the set-up cells, the given
model and the solution cells, exec'd here, so the two never drift apart). The notebook measures
once; on a shared machine one measurement moves with the load, so this prints the median and the
range of several runs. Throughput: tokens per second of n decode steps, each one model call on the
newest token of every row, timed directly after an untimed prefill (the notebook subtracts two
timings of decode_batch instead, which a long prefill makes noisy), every prompt of the same
length. Training step: peak bytes of the tensors made in a forward and backward pass
(course_utils.allocations), and CPU time. Prints; asserts nothing. One torch thread, as in the notebook.
"""
import argparse
import re
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from nbtools import SOLUTIONS, load  # noqa: E402


def notebook_namespace():
    """The import cell, the grader-setup cells and every solution cell of the lesson, run in one namespace."""
    nb = load(SOLUTIONS / "09_flash_backward_and_batching.ipynb")
    namespace = {"__name__": "__lesson09__"}
    for cell in nb.cells:
        meta = cell.metadata
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        if "grader-setup" in meta.get("tags", []) or meta.get("nbgrader", {}).get("solution"):
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%"))
            exec(re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", source), namespace)
    return namespace


def cpu_seconds(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def spread(values, scale=1.0, fmt="{:.0f}"):
    values = [scale * v for v in values]
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


@torch.no_grad()
def decode_seconds(ns, model, prompts, steps):
    """CPU seconds of `steps` decode steps after an untimed prefill, with the lesson's left_pad and StaticKVCache."""
    ids, positions, key_mask = ns["left_pad"](prompts)
    B, L = ids.shape
    caches = [ns["StaticKVCache"](B, model.n_heads, L + steps + 1, model.head_dim) for _ in model.blocks]
    mask = torch.ones(B, L + steps + 1, dtype=torch.bool)
    mask[:, :L] = key_mask
    lengths = key_mask.sum(1)
    token = model(ids, positions, mask, caches)[:, -1:].argmax(-1)
    start = time.process_time()
    for t in range(steps):
        token = model(token, (lengths + t)[:, None], mask, caches)[:, -1:].argmax(-1)
    return time.process_time() - start


def throughput(ns, contexts, batches, steps, runs):
    model = ns["RoPEDecoder"](vocab=512, d_model=256, n_heads=8, n_layers=4).eval()
    print(f"\ndecode throughput, {runs} runs: median (min-max) tokens/s; {steps} decode steps, CPU time")
    for context in contexts:
        rates = {}
        for B in batches:
            gen = torch.Generator().manual_seed(B)
            batch = [torch.randint(1, 512, (context,), generator=gen) for _ in range(B)]
            decode_seconds(ns, model, batch, 2)                                              # warm-up
            rates[B] = [B * steps / decode_seconds(ns, model, batch, steps) for _ in range(runs)]
        base = statistics.median(rates[batches[0]])
        print(f"context {context}: " + "; ".join(f"batch {B}: {spread(r)} ({statistics.median(r) / base:.1f}x)"
                                                 for B, r in rates.items()), flush=True)


def training_step(ns, lengths, runs):
    allocations = __import__("course_utils.allocations", fromlist=["AllocatedMemory"])
    def naive(q, k, v, causal=False):
        """The notebook's naive_attention (square causal case): the full scores, their softmax, the weighted sum."""
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if causal:
            L = scores.shape[-1]
            scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(scores, -1) @ v

    def step(fn, q, k, v, grad):
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        fn(q, k, v, causal=True).backward(grad)

    print(f"\none training step (forward + backward, causal), (1, 4, L, 64), {runs} runs: peak MiB; median (min-max) ms")
    for L in lengths:
        q, k, v, grad = (torch.randn(1, 4, L, 64) for _ in range(4))
        row = []
        for name, fn in (("naive", naive), ("flash", ns["flash_attention"])):
            with allocations.AllocatedMemory() as mem:
                step(fn, q, k, v, grad)
            times = [cpu_seconds(lambda: step(fn, q, k, v, grad)) for _ in range(runs)]
            row.append((name, mem.peak_bytes, times))
        (_, m_naive, t_naive), (_, m_flash, t_flash) = row
        print(f"L = {L:5d}: naive {m_naive / 2**20:7.1f} MiB, {spread(t_naive, 1e3, '{:.1f}')} ms;  flash "
              f"{m_flash / 2**20:5.1f} MiB, {spread(t_flash, 1e3, '{:.1f}')} ms;  time ratio "
              f"{statistics.median(t_flash) / statistics.median(t_naive):.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["throughput", "training"])
    parser.add_argument("--contexts", type=int, nargs="+", default=[128])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ns = notebook_namespace()
    print(f"torch {torch.__version__}, one thread")
    if args.only in (None, "training"):
        training_step(ns, args.lengths, args.runs)
    if args.only in (None, "throughput"):
        throughput(ns, args.contexts, args.batches, args.steps, args.runs)


if __name__ == "__main__":
    main()
