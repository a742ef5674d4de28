"""Lesson 6's measured experiment, repeated over seeds: no positions, learned, sinusoidal.

Runs the notebook's own code (taken from solutions/06_positional_encoding.ipynb, including
its reference answers) in full mode and prints accuracy by test length for each seed, plus
wall and process time, and, in sequences of 48, the accuracy at the positions seen in
training (1-15) and at the new ones (16-47), with the best new position.    python benchmarks/lesson06_positions.py [--seeds 3]
"""
import argparse
import os
import time
from pathlib import Path

import matplotlib
import nbformat

matplotlib.use("Agg")
NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "06_positional_encoding.ipynb"


def notebook_namespace():
    """Execute the set-up cell, the answers, and the cells that define the task, models and training."""
    os.environ.setdefault("COURSE_FAST", "0")
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and c.get("id") != "colab-setup"]
    answers = [c.source for c in cells if c.metadata.get("nbgrader", {}).get("solution")]
    task = [c.source for c in cells if "class OrderModel" in c.source]
    training = [c.source for c in cells if c.source.startswith("def train_order_model")]
    namespace = {}
    for source in [cells[0].source] + answers + task + [training[0][: training[0].index("\nsteps = ")]]:
        exec("\n".join(line for line in source.splitlines() if not line.startswith("%")), namespace)
    return namespace


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    ns = notebook_namespace()
    builders = {"none": lambda: None,
                "learned": lambda: ns["LearnedPositions"](32, ns["MAX_LEN"]),
                "sinusoidal": lambda: ns["PositionalEncoding"](32, ns["MAX_LEN"])}
    print("lengths:", ns["TEST_LENGTHS"], "(trained on", ns["TRAIN_LENGTHS"], ")")
    for seed in range(args.seeds):
        for name, build in builders.items():
            ns["cu"].seed_everything(seed)
            wall, cpu = time.perf_counter(), time.process_time()
            model = ns["OrderModel"](build())
            ns["train_order_model"](model, args.steps, seed=seed)
            accuracy = [ns["accuracy_by_position"](model, n).mean().item() for n in ns["TEST_LENGTHS"]]
            at_48 = ns["accuracy_by_position"](model, 48)
            print(f"seed {seed}  {name:10s} " + " ".join(f"{100 * a:5.1f}%" for a in accuracy)
                  + f"   L=48: positions 1-15 {100 * at_48[:15].mean():5.1f}%, 16-47 {100 * at_48[15:].mean():5.1f}%"
                  + f" (best {100 * at_48[15:].max():3.0f}%)"
                  + f"   wall {time.perf_counter() - wall:4.1f} s  process {time.process_time() - cpu:4.1f} s",
                  flush=True)


if __name__ == "__main__":
    main()
