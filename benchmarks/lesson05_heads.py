"""Lesson 5's measured experiment, repeated over seeds: one head against several on the two-look-up task.

Runs the notebook's own code (taken from solutions/05_multi_head_attention.ipynb) in full
mode and prints, for each seed, the accuracy of each model on both look-ups, plus wall and
process time; for the one-head model, its weaker look-up's accuracy at the positions where
"previous" and "mirror" ask for the same key (0 and 4) and elsewhere.    python benchmarks/lesson05_heads.py [--seeds 3]
"""
import argparse
import os
import time
from pathlib import Path

import matplotlib
import nbformat

matplotlib.use("Agg")
NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "05_multi_head_attention.ipynb"


def notebook_namespace():
    """Execute the set-up cell and the cells that define the task, the model and the training loop."""
    os.environ.setdefault("COURSE_FAST", "0")
    cells = [c.source for c in nbformat.read(str(NOTEBOOK), as_version=4).cells
             if c.cell_type == "code" and c.get("id") != "colab-setup"]
    wanted = [cells[0]] + [s for s in cells if "class LookupModel" in s or s.startswith("def train_lookup")]
    namespace = {}
    for source in wanted:
        source = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
        if source.startswith("def train_lookup"):  # definitions only, not the training run that follows
            source = source[: source.index("\nsteps = ")]
        exec(source, namespace)
    return namespace


def weaker_by_position(ns, model, n=2000):
    """The one-head model's weaker look-up: accuracy where both look-ups ask for the same key, and elsewhere."""
    torch = ns["torch"]
    length = ns["SEQ_LEN"]
    same = [t for t in range(length) if (t - 1) % length == length - 1 - t]
    other = [t for t in range(length) if t not in same]
    x, previous, mirror = ns["lookup_batch"](n, torch.Generator().manual_seed(123))
    with torch.no_grad():
        (logits_previous, logits_mirror), _ = model(x)
    accuracy = {"previous": (logits_previous.argmax(-1) == previous).float().mean(0),
                "mirror": (logits_mirror.argmax(-1) == mirror).float().mean(0)}
    name = min(accuracy, key=lambda k: accuracy[k].mean().item())
    return (f"({name}) at positions {same}: {100 * accuracy[name][same].mean():5.1f}%, "
            f"elsewhere {100 * accuracy[name][other].mean():5.1f}%")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    ns = notebook_namespace()
    configs = {"1 layer, 1 head": (1, 1), "1 layer, 2 heads": (2, 1),
               "1 layer, 4 heads": (4, 1), "2 layers, 1 head each": (1, 2)}
    for seed in range(args.seeds):
        for name, (heads, layers) in configs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            model, _ = ns["train_lookup"](heads, layers, args.steps, seed=seed)
            previous, mirror = ns["lookup_accuracy"](model)
            line = (f"seed {seed}  {name:22s} previous {100 * previous:5.1f}%  mirror {100 * mirror:5.1f}%  "
                    f"wall {time.perf_counter() - wall:4.1f} s  process {time.process_time() - cpu:4.1f} s")
            if (heads, layers) == (1, 1):
                line += "   weaker look-up " + weaker_by_position(ns, model)
            print(line, flush=True)


if __name__ == "__main__":
    main()
