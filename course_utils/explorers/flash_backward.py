"""Lesson 9's explorer: FlashAttention's backward pass, one tile at a time.

A small attention problem (one head, L queries and keys) is differentiated the way
FlashAttention does it: key blocks outside, query blocks inside, each tile's weights
recomputed from q, k and the saved log-sum-exp. The explorer replays that loop up to a
chosen step and draws three panels: the weights recomputed so far (the tile of this step
framed, tiles a causal mask skips hatched), the tile's dS = P * (dP - D), and how many of
the tiles each row of dQ and dK needs have been added. The student's flash_backward runs on
the same problem and its gradients are compared with autograd's. If it is unfinished, a
message says so instead of a traceback.
"""
import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from .common import Explorer, explain_failure, message_html, show_figure

BLOCKS = (2, 3, 4, 6)


def tile_order(length, block, causal):
    """The (query block start, key block start, skipped) of every tile, key blocks outside, in loop order."""
    order = []
    for j0 in range(0, length, block):
        for i0 in range(0, length, block):
            last_query = min(i0 + block, length) - 1
            order.append((i0, j0, causal and j0 > last_query))
    return order


def reference(q, k, v, grad_o, causal):
    """Output, log-sum-exp and autograd's (dq, dk, dv) of one head, all (L, d) or (L,), in float64."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~torch.ones_like(scores, dtype=torch.bool).tril(), float("-inf"))
    o = torch.softmax(scores, -1) @ v
    grads = torch.autograd.grad(o, (q, k, v), grad_o)
    return o.detach(), torch.logsumexp(scores, -1).detach(), grads


class FlashBackwardExplorer(Explorer):
    """Step through the tiles of FlashAttention's backward pass.

    backward_fn(q, k, v, o, lse, grad_o, causal=..., block_q=..., block_k=...) -> (dq, dk, dv): the student's
    flash_backward, called on (1, 1, L, d) tensors. Attributes for driving it from code: step (IntSlider),
    block (Dropdown), causal (Checkbox), message (HTML), plot (Output); after each render: order (the tiles),
    partial (dq, dk, dv after the tiles so far, (L, d) each), weights (the (L, L) weights recomputed so far,
    NaN where not yet), student_gap (largest gap of the student's gradients to autograd's, or None),
    figure (closed matplotlib figure).
    """

    def __init__(self, backward_fn, length=12, d=4, seed=0):
        self.backward_fn, self.length = backward_fn, length
        gen = torch.Generator().manual_seed(seed)
        self.q, self.k, self.v, self.grad_o = (torch.randn(length, d, generator=gen, dtype=torch.float64)
                                               for _ in range(4))
        self.k = self.k * 1.5                          # peaked weights: the tiles differ visibly
        self.partial, self.weights, self.student_gap, self.figure, self.order = None, None, None, None, []
        self._updating = False
        self.block = widgets.Dropdown(options=list(BLOCKS), value=4, description="block")
        self.causal = widgets.Checkbox(value=True, description="causal")
        self.step = widgets.IntSlider(value=1, min=1, max=1, description="tiles done", continuous_update=False,
                                      style={"description_width": "initial"})
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        for w in (self.block, self.causal):
            w.observe(lambda change: self._new_problem(), names="value")
        self.step.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.block, self.causal, self.step]), self.message, self.plot])
        self._new_problem()

    def _new_problem(self):
        causal, block = self.causal.value, self.block.value
        self.order = tile_order(self.length, block, causal)
        self.o, self.lse, self.want = reference(self.q, self.k, self.v, self.grad_o, causal)
        self.D = (self.grad_o * self.o).sum(-1)
        self._student(causal, block)
        self._updating = True
        try:
            self.step.max = len(self.order)
            first = self.figure is None           # the first picture shows the loop half done
            self.step.value = len(self.order) // 2 + 1 if first else min(self.step.value, len(self.order))
        finally:
            self._updating = False
        self.render()

    def _student(self, causal, block):
        four = lambda t: t[None, None]
        try:
            got = self.backward_fn(four(self.q), four(self.k), four(self.v), four(self.o), four(self.lse),
                                   four(self.grad_o), causal=causal, block_q=block, block_k=block)
            got = [torch.as_tensor(g).detach().double().reshape(self.length, -1) for g in got]
            self.student_gap = max((g - w).abs().max().item() for g, w in zip(got, self.want))
            self.student_note = None
        except Exception as error:  # never a traceback inside the widget
            self.student_gap = None
            if isinstance(error, NotImplementedError):
                self.student_note = message_html("Your flash_backward (Exercise 2) is not finished yet: the tiles "
                                                 "below are the course's own replay. Finish it and re-run this cell "
                                                 "to compare its gradients.", "todo")
            else:
                self.student_note = explain_failure(error)

    def _replay(self, steps):
        """dq, dk, dv after the first `steps` tiles, the weights recomputed so far, and the last tile's dS."""
        L, scale = self.length, 1 / math.sqrt(self.q.shape[-1])
        dq, dk, dv = (torch.zeros_like(t) for t in (self.q, self.k, self.v))
        weights = torch.full((L, L), float("nan"), dtype=torch.float64)
        block, causal, ds = self.block.value, self.causal.value, None
        for i0, j0, skipped in self.order[:steps]:
            if skipped:
                ds = None
                continue
            rows, cols = slice(i0, i0 + block), slice(j0, j0 + block)
            scores = self.q[rows] @ self.k[cols].T * scale
            if causal:
                future = torch.arange(j0, j0 + scores.shape[1])[None, :] > torch.arange(i0, i0 + scores.shape[0])[:, None]
                scores = scores.masked_fill(future, float("-inf"))
            p = torch.exp(scores - self.lse[rows, None])
            weights[rows, cols] = p
            dv[cols] += p.T @ self.grad_o[rows]
            ds = p * (self.grad_o[rows] @ self.v[cols].T - self.D[rows, None])
            dq[rows] += ds @ self.k[cols] * scale
            dk[cols] += ds.T @ self.q[rows] * scale
        return (dq, dk, dv), weights, ds

    def render(self):
        """Redraw for the current controls; never raises."""
        if self._updating:
            return
        steps = self.step.value
        self.partial, self.weights, ds = self._replay(steps)
        self._draw(steps, ds)
        self._describe(steps)

    def _needed(self):
        """For every row of dq and of dk: (tiles that touch it, of them done so far)."""
        L, block = self.length, self.block.value
        need_q, need_k, done_q, done_k = np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L)
        for n, (i0, j0, skipped) in enumerate(self.order):
            if skipped:
                continue
            need_q[i0:i0 + block] += 1
            need_k[j0:j0 + block] += 1
            if n < self.step.value:
                done_q[i0:i0 + block] += 1
                done_k[j0:j0 + block] += 1
        return need_q, done_q, need_k, done_k

    def _describe(self, steps):
        i0, j0, skipped = self.order[steps - 1]
        block, L = self.block.value, self.length
        q_rows, k_rows = f"{i0}..{min(i0 + block, L) - 1}", f"{j0}..{min(j0 + block, L) - 1}"
        live = sum(not s for _, _, s in self.order)
        notes = [f"Tile {steps} of {len(self.order)} (key block {k_rows} outside, query block {q_rows} inside; "
                 f"{len(self.order) - live} of the {len(self.order)} tiles lie wholly in the future and are skipped)."]
        if skipped:
            notes.append("This tile is skipped: every key in it comes after every query in it.")
        else:
            notes.append(f"Recomputed P = exp(S - lse) for queries {q_rows} against keys {k_rows} from q, k and the "
                         f"saved log-sum-exp of rows {q_rows}; added P^T dO to dv[{k_rows}], dS K to dq[{q_rows}], "
                         f"dS^T Q to dk[{k_rows}]. The largest tensor held: this {min(block, L - i0)} x "
                         f"{min(block, L - j0)} tile, never the {L} x {L} matrix.")
        gaps = [(p - w).abs().max().item() for p, w in zip(self.partial, self.want)]
        if steps == len(self.order):
            notes.append(f"Every tile done: the replayed dq, dk, dv equal autograd's (max gap {max(gaps):.1e}).")
        else:
            notes.append(f"So far the replay's dq, dk, dv are off autograd's by up to {gaps[0]:.2f}, {gaps[1]:.2f}, "
                         f"{gaps[2]:.2f}: rows still waiting for tiles.")
        text = message_html(" ".join(notes))
        if self.student_gap is not None:
            good = self.student_gap < 1e-6
            text += message_html(f"Your flash_backward on this problem (block {block}, causal={self.causal.value}): "
                                 f"largest gap to autograd's gradients {self.student_gap:.1e}"
                                 + (" (equal)." if good else ": check the log-sum-exp shift, D = rowsum(dO * O) and "
                                                             "the causal mask."), "info" if good else "error")
        else:
            text += self.student_note
        self.message.value = text

    def _draw(self, steps, ds):
        L, block = self.length, self.block.value
        i0, j0, skipped = self.order[steps - 1]
        fig, (ax_p, ax_ds, ax_rows) = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1, 1, 1.2]})
        cmap = plt.get_cmap("viridis").with_extremes(bad="#f4f4f4")
        ax_p.imshow(np.ma.masked_invalid(self.weights.numpy()), cmap=cmap, vmin=0, vmax=1)
        for a0, b0, skip in self.order:
            if skip:
                ax_p.add_patch(Rectangle((b0 - 0.5, a0 - 0.5), min(block, L - b0), min(block, L - a0), fill=False,
                                         hatch="//", ec="#bbbbbb", lw=0))
        ax_p.add_patch(Rectangle((j0 - 0.5, i0 - 0.5), min(block, L - j0), min(block, L - i0), fill=False,
                                 ec="#d62728", lw=2.5))
        ax_p.set(title=f"weights recomputed so far ({steps} of {len(self.order)} tiles)\nframed: this tile; "
                 "hatched: skipped", xlabel="key", ylabel="query")
        if ds is None:
            ax_ds.text(0.5, 0.5, "skipped tile:\nnothing to add", ha="center", va="center", transform=ax_ds.transAxes)
            ax_ds.set(xticks=[], yticks=[], title="this tile's dS")
        else:
            limit = max(float(ds.abs().max()), 1e-9)
            image = ax_ds.imshow(ds.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit,
                                 extent=(j0 - 0.5, j0 + ds.shape[1] - 0.5, i0 + ds.shape[0] - 0.5, i0 - 0.5))
            fig.colorbar(image, ax=ax_ds, fraction=0.046)
            ax_ds.set(title="this tile's dS = P * (dP - D)", xlabel="key", ylabel="query",
                      xticks=range(j0, j0 + ds.shape[1]), yticks=range(i0, i0 + ds.shape[0]))
        need_q, done_q, need_k, done_k = self._needed()
        rows = np.arange(L)
        ax_rows.barh(rows - 0.2, need_q, height=0.4, color="#c6dbef", label="dq: tiles needed")
        ax_rows.barh(rows - 0.2, done_q, height=0.4, color="#1f77b4", label="dq: done")
        ax_rows.barh(rows + 0.2, need_k, height=0.4, color="#fdd0a2", label="dk, dv: tiles needed")
        ax_rows.barh(rows + 0.2, done_k, height=0.4, color="#e6550d", label="dk, dv: done")
        ax_rows.invert_yaxis()
        ax_rows.set(title="tiles added to each row of the gradients", xlabel="tiles", ylabel="row (query / key)")
        ax_rows.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, fontsize=8)
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def flash_backward_explorer(backward_fn, length=12):
    """Build and return a FlashBackwardExplorer; display it by leaving it last in a cell."""
    return FlashBackwardExplorer(backward_fn, length=length)
