"""Multi-query associative recall (MQAR, Arora et al. 2023, "Zoology"), in the small form lesson 10 uses.

An example holds `n_pairs` key-value pairs with distinct keys, then queries: every key of the context,
in a shuffled order. The answer to a query is the value stored with its key. Keys are ids in
[0, n_keys), values ids in [0, n_values); both are generated from a seed, nothing is downloaded.

Zoology's sequences interleave key and value tokens, so a model must also learn to bind each value to
the key before it (its models use a short convolution for that). Here each pair arrives as one
position holding both ids: the models only have to store and retrieve, which is the part MQAR
measures, and they train in seconds on a CPU.
"""
from dataclasses import dataclass

import torch


@dataclass
class RecallBatch:
    """keys (B, N) and values (B, N): the context; queries (B, N): keys to look up; answers (B, N)."""

    keys: torch.Tensor
    values: torch.Tensor
    queries: torch.Tensor
    answers: torch.Tensor

    def to(self, device):
        return RecallBatch(*(t.to(device) for t in (self.keys, self.values, self.queries, self.answers)))


def recall_batch(batch_size, n_pairs, n_keys=128, n_values=64, generator=None):
    """A batch of MQAR examples with `n_pairs` pairs each (distinct keys), every key queried once."""
    if not 1 <= n_pairs <= n_keys:
        raise ValueError(f"n_pairs: expected 1 to n_keys = {n_keys} (keys are distinct), got {n_pairs}")
    keys = torch.argsort(torch.rand(batch_size, n_keys, generator=generator), dim=1)[:, :n_pairs]
    values = torch.randint(0, n_values, (batch_size, n_pairs), generator=generator)
    order = torch.argsort(torch.rand(batch_size, n_pairs, generator=generator), dim=1)
    return RecallBatch(keys, values, keys.gather(1, order), values.gather(1, order))
