"""Lesson 8's measurements, with more lengths and repeats than the notebook has time for.

Runs the notebook's own code (the given layer, the solution answers and the measuring helpers
of solutions/08_fast_attention.ipynb) and prints:

* generation with and without the KV cache, against the context length: time to first token (the
  prefill), time per output token (the decode steps) and the end-to-end time of all new tokens;
* peak memory (bytes of the tensors created, counted by course_utils.memory.TensorMemory) and
  time of naive against tiled attention, against the sequence length;
* the KV-cache memory of a 7B-shaped model for G = H, H/4 and 1 key/value heads.

    python benchmarks/lesson08_inference.py [--device cuda] [--threads 2]

Every time is the notebook's `seconds`, i.e. the course's timer `course_utils.time_call` (a warm-up
call, then the median of the timed calls): on a CPU the CPU time of this process, which other
programs on a shared machine inflate much less than wall time (they still share caches and memory
bandwidth, so compare the columns of one run, as ratios, rather than runs); on a GPU wall time with
the device synchronised.
"""
import argparse
import os
import re
import time
from pathlib import Path

import matplotlib
import nbformat

matplotlib.use("Agg")
NOTEBOOK = Path(__file__).resolve().parent.parent / "solutions" / "08_fast_attention.ipynb"


def notebook_namespace(device):
    """Execute the set-up cell, the given layer, the solution cells and the helpers' definitions."""
    os.environ.setdefault("COURSE_FAST", "0")
    if device:
        os.environ["COURSE_DEVICE"] = device
    cells = [c for c in nbformat.read(str(NOTEBOOK), as_version=4).cells
             if c.cell_type == "code" and c.get("id") != "colab-setup"]
    wanted = [cells[0].source]
    for cell in cells[1:]:
        source = cell.source
        if cell.metadata.get("nbgrader", {}).get("solution") or source.startswith(("class CausalSelfAttention",
                                                                                   "class TinyDecoder")):
            wanted.append(source)
        elif source.startswith("def naive_attention"):
            wanted.append(source[: source.index("\nlengths = ")])  # definitions only, not the measurement
    namespace = {}
    for source in wanted:
        source = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
        exec(re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", source), namespace)
    return namespace


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "mps"], default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args()
    ns = notebook_namespace(args.device)
    torch = ns["torch"]
    if args.threads:
        torch.set_num_threads(args.threads)
    device = ns["device"]
    print(f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads")

    print("\n1. Generation with and without the KV cache (TinyDecoder: 4 layers, d_model 256, 8 heads)")
    print(f"   {args.new_tokens} new tokens; ms, recomputing / with the cache")
    torch.manual_seed(0)
    model = ns["TinyDecoder"]().to(device).eval()
    seconds, n = ns["seconds"], args.new_tokens
    for L in (64, 128, 256, 512, 1024, 2048):
        prompt = torch.randint(0, 100, (1, L), generator=torch.Generator().manual_seed(L)).to(device)
        ttft_r = seconds(lambda: model(prompt)[:, -1:].argmax(-1), 3)
        total_r = seconds(lambda: ns["generate_recompute"](model, prompt, n), 3)
        ttft_c = seconds(lambda: ns["prefill"](model, prompt), 3)
        decode_c = seconds(lambda state: ns["decode"](model, *state, n - 1), 3, setup=lambda: ns["prefill"](model, prompt))
        total_c = seconds(lambda: ns["generate_cached"](model, prompt, n), 3)
        tpot_r, tpot_c = (total_r - ttft_r) / (n - 1), decode_c / (n - 1)
        caches, _ = ns["prefill"](model, prompt)
        cache_mib = sum(c.k.nbytes + c.v.nbytes for c in caches) / 2**20
        print(f"   context {L:5d}: first token {1e3 * ttft_r:7.1f} / {1e3 * ttft_c:7.1f}   per output token "
              f"{1e3 * tpot_r:7.2f} / {1e3 * tpot_c:5.2f} ({tpot_r / tpot_c:5.1f}x)   all {n} {1e3 * total_r:8.1f} / "
              f"{1e3 * total_c:7.1f} ({total_r / total_c:4.1f}x)   cache {cache_mib:6.2f} MiB", flush=True)

    print("\n2. Naive against tiled attention (B=1, H=4, head_dim 64, tile 128)")
    for L in (256, 512, 1024, 2048, 4096):
        q, k, v = (torch.randn(1, 4, L, 64, generator=torch.Generator().manual_seed(L)).to(device) for _ in range(3))
        naive_peak, naive_s = ns["measure"](ns["naive_attention"], q, k, v)
        tiled_peak, tiled_s = ns["measure"](lambda q, k, v: ns["tiled_attention"](q, k, v, 128), q, k, v)
        gap = (ns["tiled_attention"](q, k, v, 128) - ns["naive_attention"](q, k, v)).abs().max().item()
        print(f"   L {L:5d}: peak naive {naive_peak / 2**20:8.2f} MiB  tiled {tiled_peak / 2**20:6.2f} MiB "
              f"({naive_peak / tiled_peak:5.1f}x)   time naive {1e3 * naive_s:7.1f} ms  tiled {1e3 * tiled_s:7.1f} ms "
              f"({tiled_s / naive_s:4.1f}x slower)   gap {gap:.1e}", flush=True)

    print("\n3. KV cache of a 7B-shaped model (32 layers, H = 32, head_dim 128, 4096 tokens, 16-bit)")
    layers, H, head_dim, context = 32, 32, 128, 4096
    for G in (H, H // 4, 1):
        cache = ns["KVCache"]()
        cache.update(torch.zeros(1, G, context, head_dim, dtype=torch.float16),
                     torch.zeros(1, G, context, head_dim, dtype=torch.float16))
        total = layers * (cache.k.nbytes + cache.v.nbytes)
        print(f"   G = {G:2d}: {total / 2**30:6.3f} GiB per sequence, {total / context / 2**10:6.0f} KiB per token")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
