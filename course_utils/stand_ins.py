"""Stand-in parts for tests: modules with an exercise's interface and shapes, never its answer.

A test that checks one part of a model on its own (lesson 01's Seq2Seq.forward, whose encoder
and decoder are Exercises 1 and 2) builds the model around these stand-ins, so that a part that
is not done yet does not fail the whole. They compute something simple on purpose: they only
have the right shapes and stay differentiable.

They live in an importable module because the grader sends a test's objects into the student's
kernel as data only; a module defined inside a test cell would arrive there as a stand-in of
its own, with no parameters for the student's model to register.
"""
import torch
from torch import nn


class ShapeOnlyEncoder(nn.Module):
    """forward(src (B, L), src_lengths (B,)) -> outputs (B, L, hidden_dim), final (B, hidden_dim).

    The outputs are a running sum of embeddings; `final` is their mean (not an RNN's last state)."""

    def __init__(self, vocab_size, emb_dim, hidden_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_dim)

    def forward(self, src, src_lengths):
        outputs = self.embedding(src).cumsum(1)
        return outputs, outputs.mean(1)


class ShapeOnlyDecoder(nn.Module):
    """The layers a Decoder has (embedding, rnn, out), and a step with the right shapes.

    step(token (B,), hidden (B, H), context (B, H)) -> logits (B, vocab_size), hidden (B, H).
    The step does not use `rnn`: it is a shape check, not a decoder."""

    def __init__(self, vocab_size, emb_dim, hidden_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = nn.GRU(emb_dim + hidden_dim, hidden_dim, batch_first=True)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def step(self, token, hidden, context):
        hidden = torch.tanh(hidden + context + self.embedding(token).mean(-1, keepdim=True))
        return self.out(hidden), hidden
