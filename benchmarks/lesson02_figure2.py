"""Lesson 2: the small replica of Bahdanau et al. (2014) Figure 2, with timings.

Runs the solution notebook's own definitions (its exercise solutions and its
ready-made models, taken from solutions/02_bahdanau_attention.ipynb) and trains
the no-attention baseline and the attention model with the notebook's full-mode
settings, then prints the wall and process time of each training run and the
held-out exact match by source length. Options try other budgets, and
--bahdanau-loop also trains Bahdanau's step-by-step arrangement (the notebook's
BahdanauSeq2Seq) with the same budget, for comparison.

    python benchmarks/lesson02_figure2.py [--steps N] [--threads 2] [--bahdanau-loop] [--general]
"""
import argparse
import os
import re
import time
from pathlib import Path

import nbformat
import torch

NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "02_bahdanau_attention.ipynb"


def notebook_namespace():
    """Execute the notebook's definition cells (everything up to the training cells) in a dict."""
    os.environ["COURSE_FAST"] = "0"
    os.environ.setdefault("MPLBACKEND", "Agg")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    namespace = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
            continue  # test cells are not needed here
        source = re.sub(r"^%.*$", "", cell.source, flags=re.M)
        if "settings = dict(" in source:  # the first training cell: read its settings and stop
            namespace["_settings_source"] = source
            break
        if "time_training_step(model" in source:
            source = re.split(r"(?:try:\s*)?step_seconds =", source)[0]  # task and vocab, without the timing
        if "draw_attention_step()" in source or "raised[4]" in source:
            continue  # pictures
        exec(compile(source, f"{NOTEBOOK.name} cell", "exec"), namespace)
    return namespace


def notebook_settings(source):
    match = re.search(r"steps=cu\.budget\(full=(\d+).*?batch_size=(\d+), lr=([0-9.e-]+)", source, flags=re.S)
    steps, batch_size, lr = match.groups()
    return int(steps), int(batch_size), float(lr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the notebook's)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--n", type=int, default=200, help="held-out sources per length")
    parser.add_argument("--bahdanau-loop", action="store_true", help="also train BahdanauSeq2Seq (slow)")
    parser.add_argument("--general", action="store_true", help="also train the model with GeneralScore")
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ns = notebook_namespace()
    cu, task = ns["cu"], ns["task"]
    steps, batch_size, lr = notebook_settings(ns["_settings_source"])
    steps = args.steps or steps
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {steps} steps, batch {batch_size}, "
          f"lr {lr}, lengths {task.min_len}..{task.max_len}")
    vocab_size = len(task.vocab)
    models = {}
    if not args.skip_baseline:
        models["no_attention"] = lambda: ns["NoAttentionSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64)
    models["bahdanau"] = lambda: ns["AttentionSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64, attn_dim=16)
    if args.general:
        models["luong_general"] = lambda: ns["AttentionSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64,
                                                                 score="general")
    if args.bahdanau_loop:
        models["bahdanau_step_loop"] = lambda: ns["BahdanauSeq2Seq"](vocab_size, emb_dim=32, hidden_dim=64,
                                                                     attn_dim=16)
    lengths = [5, 10, 15, 20, 25, 30]
    results = {}
    for name, build in models.items():
        cu.seed_everything(0)
        model = build()
        wall, cpu = time.perf_counter(), time.process_time()
        history = cu.train_seq2seq(model, task, ns["sequence_loss"], steps=steps, batch_size=batch_size, lr=lr,
                                   lengths=(task.min_len, task.max_len), progress=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        decode = model.greedy if hasattr(model, "greedy") else None
        if decode is None:  # BahdanauSeq2Seq: greedy decoding with its decoder step
            def decode(src, src_lengths, max_len, model=model):
                annotations, hidden = model.encoder(src, src_lengths)
                mask = ns["source_mask"](src_lengths, src.shape[1])
                token, out = torch.full((src.shape[0],), ns["BOS"]), []
                with torch.no_grad():
                    for _ in range(max_len):
                        logits, hidden, _ = model.decoder.step(token, hidden, annotations, mask)
                        token = logits.argmax(-1)
                        out.append(token)
                return torch.stack(out, 1)
        eval_wall = time.perf_counter()
        results[name] = cu.evaluate_by_length(decode, task, lengths, n=args.n)
        eval_wall = time.perf_counter() - eval_wall
        print(f"{name:20s} train {wall:6.1f} s wall, {cpu:6.1f} s process ({1000 * wall / steps:.0f} ms/step); "
              f"eval {eval_wall:.1f} s; last-50 loss {sum(history['loss'][-50:]) / 50:.4f}")
    print("\nexact match (%) by source length, held-out n =", args.n)
    print(f"{'length':>6} " + " ".join(f"{name:>20s}" for name in results))
    for n in lengths:
        print(f"{n:6d} " + " ".join(f"{100 * results[name][n]:20.1f}" for name in results))


if __name__ == "__main__":
    main()
