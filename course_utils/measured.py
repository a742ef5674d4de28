"""Measured figures that a lesson shows next to its own, so that it need not re-run an earlier lesson.

Each constant says how it was measured; re-run that command to check or refresh it.
"""

# Lesson 2's two RNNs on the reversal task with source lengths 5 to 50 (lesson 7's Figure 2). Measured with
# `python benchmarks/lesson07_rnn_baselines.py --threads 1` (2026-11-22, torch 2.13, CPU; the two trainings
# took 893 s and 815 s on a heavily shared 2-core machine): lesson 2's own model definitions and full-mode
# settings (GRU encoder-decoder, embeddings 32, hidden 64, attention 16; 1200 steps of 64, Adam lr 2e-2 with
# a cosine schedule, seed 0), trained on ReversalTask(num_symbols=20, min_len=5, max_len=50, seed=0); exact
# match on its 200 held-out sources per length (task.held_out). "no_attention": the fixed-context baseline;
# "bahdanau": additive attention.
LESSON02_RNN_BY_LENGTH = {
    "no_attention": {5: 0.930, 10: 0.210, 15: 0.010, 20: 0.000, 25: 0.000, 30: 0.000, 35: 0.000, 40: 0.000, 45: 0.000,
                     50: 0.000},
    "bahdanau": {5: 1.000, 10: 1.000, 15: 0.995, 20: 1.000, 25: 0.990, 30: 1.000, 35: 0.995, 40: 0.975, 45: 0.985,
                 50: 0.980},
}
