"""Lesson 7: time of one training step, Transformer against an RNN with attention, as sequences grow.

Runs the solution notebook's own definitions (solutions/07_transformer.ipynb: its
exercise solutions, the ready-made RNNWithAttention and the timing helper) and
prints milliseconds per training step (forward + backward, batch 32) at each
length, as wall time and as process time, both measured with the course's timer
(course_utils.time_call: median of the repeats after a warm-up step). Process time is what one core spent
on this process, so it is less inflated than wall time on a shared machine.

    python benchmarks/lesson07_step_time.py [--lengths 10 25 50 100 200] [--threads 1]
"""
import argparse
import os
import re
from pathlib import Path

import nbformat
import torch

import course_utils as cu

NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "07_transformer.ipynb"


def notebook_namespace():
    """Execute the notebook's definition cells, up to (not including) its first training cell."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    namespace = {}
    for cell in nbformat.read(str(NOTEBOOK), as_version=4).cells:
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade") or cell.get("id") == "colab-setup":
            continue
        source = re.sub(r"^%.*$", "", cell.source, flags=re.M)
        if "cu.train_seq2seq(" in source:
            exec(source.split("SETTINGS = dict(")[0], namespace)  # sequence_loss and the task, no training
            continue
        if "cu.evaluate_by_length(" in source:
            continue
        if "class RNNWithAttention" in source:
            exec(source.split("timing_lengths =")[0], namespace)
            return namespace
        if ("def draw_block" in source or "def block_gradients" in source or "def train_stack" in source
                or "_attn = MultiHeadAttention(8, 2)" in source):
            source = source.split("_attn = MultiHeadAttention(8, 2)")[0] if "class MultiHeadAttention" in source else ""
        exec(compile(source, NOTEBOOK.name, "exec"), namespace)
    raise RuntimeError("the notebook has no RNNWithAttention cell")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 25, 50, 100, 200])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ns = notebook_namespace()
    vocab_size = len(ns["vocab"])
    torch.manual_seed(0)
    models = {"RNN + attention": ns["RNNWithAttention"](vocab_size),
              "Transformer": ns["Transformer"](vocab_size, 64, 4, 2, 128, max_len=max(args.lengths) + 1)}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), batch 32; ms per training step, "
          f"median of {args.repeats} after one warm-up step (course_utils.time_call)")
    print(f"{'length':>6s} " + " ".join(f"{name + ' wall':>22s} {'process':>8s}" for name in models))
    for length in args.lengths:
        row = []
        task = cu.ReversalTask(num_symbols=20, min_len=5, max_len=max(length, 5), seed=1)
        batch = task.held_out(length, n=32)
        for model in models.values():
            def step(model=model):
                model.zero_grad(set_to_none=True)
                ns["sequence_loss"](model(batch.src, batch.src_lengths, batch.tgt_in), batch.tgt_out).backward()
            wall = cu.time_call(step, repeats=args.repeats, warmup=1)
            cpu = cu.time_call(step, repeats=args.repeats, warmup=0, clock="process")
            row.append(f"{wall.ms:22.1f} {cpu.ms:8.1f}")
        print(f"{length:6d} " + " ".join(row), flush=True)

if __name__ == "__main__":
    main()
