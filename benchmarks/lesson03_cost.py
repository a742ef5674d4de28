"""Lesson 3: what attention costs against sequence length, on this machine.

Times one self-attention call (explicit softmax(QK^T/sqrt(d_k))V, which holds the
full L x L weight matrix, and PyTorch's fused scaled_dot_product_attention) and
one GRU pass over the same sequence, for growing L, and prints the memory of the
weight matrix. The notebook runs a short version of this sweep; this script runs
the bigger one.

    python benchmarks/lesson03_cost.py [--max-len 8192] [--dim 64] [--repeats 5]
"""
import argparse
import math

import torch
import torch.nn.functional as F

import course_utils as cu


def explicit_attention(q, k, v):
    """softmax(QK^T / sqrt(d_k)) V, with the weights materialised: (output, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def best_time(fn, repeats):
    """Median wall time and median process time (seconds) of `repeats` calls, with the course's timer
    (course_utils.time_call: one warm-up call, the device synchronised around each call)."""
    return (cu.time_call(fn, repeats=repeats, clock="wall").median,
            cu.time_call(fn, repeats=repeats, warmup=0, clock="process").median)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-len", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 gives steadier timings on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gru = torch.nn.GRU(args.dim, args.dim, batch_first=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, d = {args.dim}")
    print(f"{'L':>6} {'explicit ms':>12} {'(cpu ms)':>9} {'fused sdpa ms':>14} {'GRU ms':>9} "
          f"{'weights MiB':>12}")
    lengths, times = [], []
    length = 128
    with torch.no_grad():
        while length <= args.max_len:
            x = torch.randn(1, length, args.dim)
            wall, cpu = best_time(lambda: explicit_attention(x, x, x), args.repeats)
            fused, _ = best_time(lambda: F.scaled_dot_product_attention(x, x, x), args.repeats)
            rnn, _ = best_time(lambda: gru(x), max(1, args.repeats // 2))
            mib = explicit_attention(x, x, x)[1].numel() * 4 / 2**20
            print(f"{length:>6} {1e3 * wall:>12.2f} {1e3 * cpu:>9.2f} {1e3 * fused:>14.2f} {1e3 * rnn:>9.2f} "
                  f"{mib:>12.1f}")
            lengths.append(length)
            times.append(wall)
            length *= 2
    # slope of log(time) against log(L) over the upper half, where fixed overheads no longer dominate
    half = len(lengths) // 2
    xs = [math.log(n) for n in lengths[half:]]
    ys = [math.log(t) for t in times[half:]]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
    print(f"explicit attention: time grows like L^{slope:.2f} for L >= {lengths[half]} (2 would be quadratic)")


if __name__ == "__main__":
    main()
