"""Lesson 7: lesson 2's two RNNs on the reversal task extended to 50 tokens (the stored Figure 2 curves).

Lesson 7 draws lesson 2's no-attention and additive-attention curves next to the
Transformer's without running lesson 2: the figures live in
course_utils/measured.py (LESSON02_RNN_BY_LENGTH). This script is where they
come from. It runs lesson 2's own model definitions (its exercise solutions and
ready-made models, from solutions/02_bahdanau_attention.ipynb) with lesson 2's
full-mode settings (steps, batch size, learning rate, sizes), on
ReversalTask(num_symbols=20, min_len=5, max_len=50, seed=0) -- lesson 7's task --
and prints exact match by length on the held-out sets lesson 7 evaluates on,
in the form course_utils/measured.py stores.

    python benchmarks/lesson07_rnn_baselines.py [--steps N] [--n 200] [--threads 2]
"""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lesson02_figure2 import notebook_namespace, notebook_settings  # noqa: E402

LENGTHS = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: lesson 2's)")
    parser.add_argument("--n", type=int, default=200, help="held-out sources per length")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ns = notebook_namespace()
    cu = ns["cu"]
    steps, batch_size, lr = notebook_settings(ns["_settings_source"])
    steps = args.steps or steps
    task = cu.ReversalTask(num_symbols=20, min_len=5, max_len=50, seed=0)
    vocab_size = len(task.vocab)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; lesson 2's settings: {steps} steps, "
          f"batch {batch_size}, lr {lr}; lengths {task.min_len}..{task.max_len}")
    models = {"no_attention": lambda: ns["NoAttentionSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64),
              "bahdanau": lambda: ns["AttentionSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64, attn_dim=16)}
    results = {}
    for name, build in models.items():
        cu.seed_everything(0)
        model = build()
        wall = time.perf_counter()
        history = cu.train_seq2seq(model, task, ns["sequence_loss"], steps=steps, batch_size=batch_size, lr=lr,
                                   lengths=(task.min_len, task.max_len), progress=False)
        wall = time.perf_counter() - wall
        results[name] = cu.evaluate_by_length(model.greedy, task, LENGTHS, n=args.n)
        print(f"{name:14s} train {wall:6.1f} s ({1000 * wall / steps:.0f} ms/step); "
              f"last-50 loss {sum(history['loss'][-50:]) / 50:.4f}", flush=True)
    print("\nexact match by source length, held-out n =", args.n)
    for name, by_length in results.items():
        print(f'    "{name}": {{' + ", ".join(f"{n}: {acc:.3f}" for n, acc in by_length.items()) + "},")


if __name__ == "__main__":
    main()
