"""Lesson 4: a next-token model trained without a causal mask cheats.

Trains the same one-layer attention language model twice on sequences from a
fixed random Markov chain (every symbol has two allowed successors, each with
probability 1/2), once with a causal mask and once without. Prints the training
loss (against ln 2, the best loss an honest model can reach), the honest loss
(each next token predicted from its prefix only, the way generation works), on
average and at the last position against the others (the unmasked model had no
future token to read at the last position in training either), and the share of
legal transitions in greedy generations.

    python benchmarks/lesson04_causal.py [--steps 300] [--seeds 3]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, LENGTH = 8, 16
_table_gen = torch.Generator().manual_seed(123)
# SUCCESSORS[s] = the two symbols allowed after s (never s itself)
SUCCESSORS = (torch.stack([torch.randperm(VOCAB - 1, generator=_table_gen)[:2] for _ in range(VOCAB)])
              + torch.arange(VOCAB)[:, None] + 1) % VOCAB


def markov_batch(batch_size, generator):
    """(B, LENGTH) int64 walks on the chain, from a uniformly random first symbol."""
    seq = torch.empty(batch_size, LENGTH, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (batch_size,), generator=generator)
    for t in range(1, LENGTH):
        seq[:, t] = SUCCESSORS[seq[:, t - 1], torch.randint(0, 2, (batch_size,), generator=generator)]
    return seq


@torch.no_grad()
def honest_losses(model, seq):
    """(L - 1,) cross-entropy of token t given only tokens 0..t-1 (one forward pass per prefix), t = 1..L-1."""
    return torch.stack([F.cross_entropy(model(seq[:, :t])[:, -1], seq[:, t]) for t in range(1, seq.shape[1])])


class TinyLM(nn.Module):
    """Token + position embeddings, one self-attention layer (causal or not), an MLP, a linear head."""

    def __init__(self, causal, d=32):
        super().__init__()
        self.causal = causal
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(LENGTH, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, VOCAB)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal))
        return self.head(x + self.mlp(x))


def train(model, steps, generator, batch_size=64, lr=3e-3):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        seq = markov_batch(batch_size, generator)
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def generate(model, prompt, n_new):
    seq = prompt
    for _ in range(n_new):
        seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"best loss an honest model can reach: ln 2 = {math.log(2):.3f} nats/token")
    for seed in range(args.seeds):
        for causal in (True, False):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            model = TinyLM(causal)
            w0, c0 = time.perf_counter(), time.process_time()
            losses = train(model, args.steps, gen)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            test = markov_batch(500, torch.Generator().manual_seed(1000 + seed))
            model.eval()
            out = generate(model, test[:, :1], LENGTH - 1)
            legal = (SUCCESSORS[out[:, :-1]] == out[:, 1:, None]).any(-1).float().mean().item()
            final = sum(losses[-20:]) / 20
            honest = honest_losses(model, test)
            print(f"seed {seed} {'causal  ' if causal else 'no mask '} training loss {final:.3f}  "
                  f"honest loss {honest.mean():.3f} (last position {honest[-1]:.3f}, others {honest[:-1].mean():.3f})"
                  f"  legal moves {100 * legal:5.1f}%  ({wall:.1f} s wall, {cpu:.1f} s process)", flush=True)

if __name__ == "__main__":
    main()
