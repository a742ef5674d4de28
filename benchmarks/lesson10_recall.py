"""Lesson 10's MQAR recall at several training budgets: does a fixed state catch up with more steps?

    python benchmarks/lesson10_recall.py                      # 600 (the notebook's) and 1800 steps
    python benchmarks/lesson10_recall.py --steps 600 --kinds linear delta --sizes 16

It runs the recall model, training loop and evaluation of solutions/10_linear_attention.ipynb (the
cell that defines RecallModel, exec'd here, so the two never drift apart) and prints, per budget, the
share of queries answered right for each number of pairs, with the memory per sequence in bytes.
Prints; asserts nothing. One torch thread, as in the notebook.
"""
import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.nbtools import SOLUTIONS, load  # noqa: E402


def notebook_namespace():
    nb = load(SOLUTIONS / "10_linear_attention.ipynb")
    source = next(c.source for c in nb.cells if c.cell_type == "code" and "class RecallModel" in c.source)
    namespace = {"elu_plus_one": lambda x: F.elu(x) + 1}
    exec("import numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
         "import course_utils as cu\nfrom course_utils.mqar import recall_batch\ndevice = torch.device('cpu')\n",
         namespace)
    exec(source, namespace)
    return namespace


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[600, 1800])
    parser.add_argument("--kinds", nargs="+", default=["softmax", "linear", "gated", "delta"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32], help="d_k of the fixed states")
    parser.add_argument("--pairs", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    args = parser.parse_args()
    torch.set_num_threads(1)
    ns = notebook_namespace()
    print(f"torch {torch.__version__}, one thread; 64 examples a step, pairs drawn from 2 to 64; "
          f"evaluation: 256 fresh examples per N")
    for steps in args.steps:
        print(f"\n{steps} steps per model")
        print(f"{'model':18s} {'bytes':>12s} {'train s':>8s}   " + "  ".join(f"N={n:<4d}" for n in args.pairs))
        for kind in args.kinds:
            for d_k in ([16] if kind == "softmax" else args.sizes):
                start = time.perf_counter()
                model = ns["train_recall"](kind, d_k, steps)
                seconds = time.perf_counter() - start
                recall = ns["recall_by_pairs"](model, args.pairs)
                size = (f"{model.memory_bytes(args.pairs[0])}..{model.memory_bytes(args.pairs[-1])}" if kind == "softmax"
                        else str(model.memory_bytes(0)))
                print(f"{kind + ', d_k=' + str(d_k):18s} {size:>12s} {seconds:8.1f}   "
                      + "  ".join(f"{100 * a:5.1f}%" for a in recall.values()), flush=True)


if __name__ == "__main__":
    main()
