"""Helpers for the attention course: data, training, plots, explorers, device and self-checks.

It holds no answer to a graded exercise: the notebooks pass their own functions in.
"""
from .checks import (ForbiddenCall, check_close, check_shape, check_true, kind_of, plain_array, plain_float,
                     plain_tensor, require)
from .diagnosis import case, diagnosed, number_mistake, raises
from .refusals import forbid, launcher_only
from .charged_once import call_with_grads, charged, end_cell, in_place_allowed, stand_in, standing_in
from .data import BOS, EOS, PAD, Batch, ReversalTask, Vocab, pad_sequences
from .measured import LESSON02_RNN_BY_LENGTH
from .plotting import plot_accuracy_by_length, plot_attention, plot_curves
from .runtime import budget, computes_on_cpu, is_fast_mode, pick_device, seed_everything
from .timing import Timing, synchronize, time_call
from .training import evaluate_by_length, exact_match, train_seq2seq, trim_at_eos

__version__ = "0.1.0"
