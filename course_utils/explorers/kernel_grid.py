"""Lesson 11's explorer: the programs of a FlashAttention forward kernel over the L x L scores.

The kernel runs one program per query tile (and per batch and head). A program loads its query tile once,
then walks the key tiles in order with a running max m, sum s and output acc for each of its rows; under a
causal mask it stops after the key tile that holds the diagonal. The explorer draws that schedule: every
program's tiles (skipped ones hatched), the tiles the chosen program has loaded so far, and the one it holds
now, framed. Beside it, the running max and sum of one of the program's rows, replayed step by step with
PyTorch on a fixed problem, against that row's true max and sum. It counts the tiles and bytes the program and
the whole kernel read. Given the student's flash_forward, it runs it on the same problem and compares.
"""
import contextlib
import importlib.util
import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from ..kernels import count_work, key_tiles
from .common import Explorer, explain_failure, message_html, show_figure

BLOCKS = (4, 8, 16)
HEAD_DIM = 16


def bytes_read(length, block_q, block_k, causal, d=HEAD_DIM, itemsize=4):
    """Bytes the whole kernel loads: each query tile once, and the key and value tiles each program visits."""
    total = length * d * itemsize
    for i0, starts in zip(range(0, length, block_q), key_tiles(length, block_q, block_k, causal)):
        total += sum(2 * min(block_k, length - j0) * d * itemsize for j0 in starts)
    return total


def running_stats(scores, starts, block_k):
    """(max, sum) of one row's scores after each visited key tile: the online softmax's m and s."""
    m, s, history = -math.inf, 0.0, []
    for j0 in starts:
        tile = scores[j0:j0 + block_k]
        tile = tile[np.isfinite(tile)]
        m_new = max(m, float(tile.max())) if tile.size else m
        s = s * math.exp(m - m_new) if m_new > -math.inf else s
        s += float(np.exp(tile - m_new).sum()) if tile.size else 0.0
        m = m_new
        history.append((m, s))
    return history


def _interpreted():
    """count_work() runs the Triton kernels launched inside it in the interpreter; without Triton, nothing."""
    return count_work() if importlib.util.find_spec("triton") else contextlib.nullcontext()


class KernelGridExplorer(Explorer):
    """Step through the programs of the forward kernel.

    forward_fn(q, k, v, causal=..., block_q=..., block_k=...) -> (o, lse): the student's flash_forward, called on
    (1, 1, L, 16) float32 tensors (or None). Attributes for driving it from code: length (IntSlider), block_q and
    block_k (Dropdown), causal (Checkbox), program, step and row (IntSlider), message (HTML), plot (Output); after
    each render: schedule (key tile starts per program), history (the row's (m, s) per step), student_gap
    (largest gap of the student's output to PyTorch's, or None), figure (closed matplotlib figure).
    """

    def __init__(self, forward_fn=None, seed=0):
        self.forward_fn = forward_fn
        gen = torch.Generator().manual_seed(seed)
        self.q_all, self.k_all, self.v_all = (torch.randn(64, HEAD_DIM, generator=gen) for _ in range(3))
        self.k_all = self.k_all * 1.5          # peaked rows: the running max moves visibly
        self.schedule, self.history, self.student_gap, self.student_note, self.figure = [], [], None, None, None
        self._updating = False
        self.length = widgets.IntSlider(value=40, min=8, max=64, step=4, description="L", continuous_update=False)
        self.block_q = widgets.Dropdown(options=list(BLOCKS), value=8, description="block_q")
        self.block_k = widgets.Dropdown(options=list(BLOCKS), value=8, description="block_k")
        self.causal = widgets.Checkbox(value=True, description="causal")
        self.program = widgets.IntSlider(value=0, min=0, max=0, description="program", continuous_update=False)
        self.step = widgets.IntSlider(value=1, min=1, max=1, description="key tiles", continuous_update=False)
        self.row = widgets.IntSlider(value=0, min=0, max=0, description="row", continuous_update=False)
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        for w in (self.length, self.block_q, self.block_k, self.causal):
            w.observe(lambda change: self._new_problem(), names="value")
        self.program.observe(lambda change: self._new_program(), names="value")
        for w in (self.step, self.row):
            w.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.length, self.block_q, self.block_k, self.causal]),
                                    widgets.HBox([self.program, self.step, self.row]), self.message, self.plot])
        self._new_problem()

    def _problem(self):
        L = self.length.value
        return self.q_all[:L], self.k_all[:L], self.v_all[:L]

    def _new_problem(self):
        L, causal = self.length.value, self.causal.value
        self.schedule = key_tiles(L, self.block_q.value, self.block_k.value, causal)
        q, k, v = self._problem()
        scores = q @ k.T / math.sqrt(HEAD_DIM)
        if causal:
            scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
        self.scores = scores.double().numpy()
        self._student(q, k, v, causal)
        self._updating = True
        try:
            self.program.max = len(self.schedule) - 1
            self.program.value = min(self.program.value, self.program.max)
        finally:
            self._updating = False
        self._new_program()

    def _new_program(self):
        if self._updating:
            return
        rows = min(self.block_q.value, self.length.value - self.program.value * self.block_q.value)
        self._updating = True
        try:
            self.step.max = len(self.schedule[self.program.value])
            self.step.value = self.step.max if self.figure is None else min(self.step.value, self.step.max)
            self.row.max = rows - 1
            self.row.value = min(self.row.value, self.row.max)
        finally:
            self._updating = False
        self.render()

    def _student(self, q, k, v, causal):
        self.student_gap, self.student_note = None, None
        if self.forward_fn is None:
            return
        four = lambda t: t[None, None]
        try:
            with _interpreted():  # CPU tensors and tiles under 16: Triton's interpreter, with or without a GPU
                o, _ = self.forward_fn(four(q), four(k), four(v), causal=causal, block_q=self.block_q.value,
                                       block_k=self.block_k.value)
            want = torch.nn.functional.scaled_dot_product_attention(four(q), four(k), four(v), is_causal=causal)
            self.student_gap = (torch.as_tensor(o).detach().float().cpu() - want).abs().max().item()
        except Exception as error:  # never a traceback inside the widget
            if isinstance(error, NotImplementedError):
                self.student_note = message_html("Your flash_forward (Exercise 2) is not finished yet: the schedule "
                                                 "below is the course's own. Finish it and re-run this cell to run it "
                                                 "on the same problem.", "todo")
            else:
                self.student_note = explain_failure(error)

    def render(self):
        """Redraw for the current controls; never raises."""
        if self._updating:
            return
        t, steps = self.program.value, self.step.value
        row = t * self.block_q.value + self.row.value
        self.history = running_stats(self.scores[row], self.schedule[t], self.block_k.value)
        self._draw(t, steps, row)
        self._describe(t, steps, row)

    def _describe(self, t, steps, row):
        L, bq, bk, causal = self.length.value, self.block_q.value, self.block_k.value, self.causal.value
        all_tiles = len(self.schedule) * math.ceil(L / bk)
        visited = sum(len(s) for s in self.schedule)
        m, s = self.history[steps - 1]
        true_m = float(np.max(self.scores[row]))
        true_s = float(np.exp(self.scores[row][np.isfinite(self.scores[row])] - true_m).sum())
        program_bytes = (min(bq, L - t * bq) + 2 * sum(min(bk, L - j0) for j0 in self.schedule[t][:steps])) \
            * HEAD_DIM * 4
        notes = [f"Program {t} of {len(self.schedule)} holds queries {t * bq}..{min((t + 1) * bq, L) - 1} and has "
                 f"loaded {steps} of its {len(self.schedule[t])} key tiles ({program_bytes:,} bytes of q, k and v "
                 f"in float32, d = {HEAD_DIM})."]
        notes.append(f"The whole kernel visits {visited} of the {all_tiles} tiles"
                     + (f" (a causal mask skips {all_tiles - visited})" if causal else "")
                     + f" and reads {bytes_read(L, bq, bk, causal):,} bytes; the {L} x {L} scores would take "
                       f"{L * L * 4:,} bytes to write once, and are never written.")
        done = steps == len(self.schedule[t])
        notes.append(f"Row {row}: running max {m:.3f}, running sum {s:.3f}"
                     + (f", equal to the row's max {true_m:.3f} and sum exp(score - max) {true_s:.3f}: the program "
                        "can now write o = acc / s and lse = m + log s." if done else
                        f"; the row's true max is {true_m:.3f}, its sum {true_s:.3f}: tiles are still to come."))
        text = message_html(" ".join(notes))
        if self.student_gap is not None:
            good = self.student_gap < 1e-4
            text += message_html(f"Your flash_forward on this problem (L = {L}, block_q = {bq}, block_k = {bk}, "
                                 f"causal = {causal}): largest gap to PyTorch's output {self.student_gap:.1e}"
                                 + (" (equal)." if good else ": check the masks, the rescale by exp(m - m_new) and "
                                                             "the causal end of the loop."),
                                 "info" if good else "error")
        elif self.student_note is not None:
            text += self.student_note
        self.message.value = text

    def _draw(self, t, steps, row):
        L, bq, bk = self.length.value, self.block_q.value, self.block_k.value
        fig, (ax_grid, ax_row) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.2]})
        ax_grid.set(xlim=(0, L), ylim=(L, 0), aspect="equal", xlabel="key", ylabel="query",
                    title=f"one program per query tile ({len(self.schedule)} programs)\nframed: the tile program "
                          f"{t} holds now; hatched: skipped")
        colours = plt.get_cmap("tab10")
        for p, starts in enumerate(self.schedule):
            i0 = p * bq
            for j0 in range(0, L, bk):
                h, w = min(bq, L - i0), min(bk, L - j0)
                if j0 not in starts:
                    ax_grid.add_patch(Rectangle((j0, i0), w, h, fill=False, hatch="//", ec="#bbbbbb", lw=0.5))
                    continue
                loaded = p == t and starts.index(j0) < steps
                ax_grid.add_patch(Rectangle((j0, i0), w, h, fc=colours(p % 10), ec="white", lw=1,
                                            alpha=0.85 if loaded else 0.18))
        j0 = self.schedule[t][steps - 1]
        ax_grid.add_patch(Rectangle((j0, t * bq), min(bk, L - j0), min(bq, L - t * bq), fill=False, ec="#d62728",
                                    lw=2.5))
        ax_grid.axhline(row + 0.5, color="black", lw=0.8, ls=":")
        ms = [m for m, _ in self.history]
        ss = [s for _, s in self.history]
        x = np.arange(1, len(self.history) + 1)
        ax_row.plot(x, ms, "o-", color="#1f77b4", label="running max m")
        ax_row.axhline(float(np.max(self.scores[row])), color="#1f77b4", ls="--", lw=0.8, label="the row's max")
        ax_s = ax_row.twinx()
        ax_s.plot(x, ss, "s-", color="#ff7f0e", label="running sum s")
        ax_row.axvline(steps, color="#d62728", lw=1)
        ax_row.set(xlabel="key tiles loaded", ylabel="m", title=f"row {row}: the online softmax's statistics",
                   xticks=x)
        ax_s.set_ylabel("s = sum of exp(score - m)")
        handles = ax_row.get_legend_handles_labels()[0] + ax_s.get_legend_handles_labels()[0]
        ax_row.legend(handles=handles, loc="lower right", fontsize=8)
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def kernel_grid_explorer(forward_fn=None):
    """The lesson's explorer; forward_fn is your flash_forward (or None for the schedule alone)."""
    return KernelGridExplorer(forward_fn)
