"""Lesson 4's explorer: switch padding and causal masks on and off and watch the weights.

It runs the student's own padding_mask, causal_mask and masked_attention on a
small batch of random queries and keys (seeded), greys out the masked cells of
the weight matrix, and shows how the remaining weights are renormalised. If an
exercise it needs is unfinished, it says which one instead of drawing.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from .common import Explorer, explain_failure, message_html, show_figure

MAX_LEN = 12


def parse_lengths(text):
    """'5 3, 6' -> [5, 3, 6]; raises ValueError with a readable message."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise ValueError("Type the length of each sequence in the batch, for instance: 6 4 2")
    try:
        lengths = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"Lengths must be whole numbers separated by spaces, got {text!r}") from None
    if any(n < 0 for n in lengths):
        raise ValueError(f"Lengths cannot be negative, got {lengths}")
    if max(lengths) > MAX_LEN:
        raise ValueError(f"This explorer draws sequences of at most {MAX_LEN} tokens, got {max(lengths)}")
    if len(lengths) > 8:
        raise ValueError(f"At most 8 sequences in the batch, got {len(lengths)}")
    return lengths


def parse_mask(text, length):
    """'110 011 111' -> a (length, length) bool tensor; '' -> None; raises ValueError."""
    rows = text.replace(",", " ").split()
    if not rows:
        return None
    if any(set(r) - {"0", "1"} for r in rows):
        raise ValueError(f"A custom mask is rows of 0 and 1 separated by spaces (1 = may attend), got {text!r}")
    if len(rows) != length or any(len(r) != length for r in rows):
        shape = (len(rows), max(len(r) for r in rows)) if len({len(r) for r in rows}) == 1 else "ragged rows"
        raise ValueError(f"The custom mask has shape {shape}, but the batch is padded to {length} tokens: "
                         f"type {length} rows of {length} digits (for instance {' '.join(['1' * length] * 2)} ...)")
    return torch.tensor([[c == "1" for c in r] for r in rows])


class MaskExplorer(Explorer):
    """Padding and causal toggles, a lengths box and an optional hand-typed mask.

    padding_mask_fn(lengths (B,), max_len) -> (B, max_len) bool, True = real token
    causal_mask_fn(length) -> (length, length) bool, True = may attend
    attention_fn(q, k, v, mask) -> (output, weights), mask (B, L, L) bool
    Attributes for driving it from code: lengths (Text), row (Dropdown: which
    sequence of the batch to draw), padding, causal (Checkbox), custom (Text),
    message (HTML), plot (Output); after each render: mask (B, L, L) bool tensor
    or None, weights (B, L, L) numpy or None, figure (closed matplotlib figure).
    """

    def __init__(self, padding_mask_fn, causal_mask_fn, attention_fn, lengths="6 4 0", d=8, seed=0):
        self.padding_mask_fn, self.causal_mask_fn, self.attention_fn = padding_mask_fn, causal_mask_fn, attention_fn
        gen = torch.Generator().manual_seed(seed)
        self._q = torch.randn(8, MAX_LEN, d, generator=gen)
        self._k = torch.randn(8, MAX_LEN, d, generator=gen)
        self._v = torch.randn(8, MAX_LEN, d, generator=gen)
        self.mask, self.weights, self.figure = None, None, None
        self.lengths = widgets.Text(value=lengths, description="lengths", continuous_update=False)
        self.row = widgets.Dropdown(options=[], description="show row")
        self.padding = widgets.Checkbox(value=True, description="padding mask")
        self.causal = widgets.Checkbox(value=False, description="causal mask")
        self.custom = widgets.Text(value="", description="custom mask", style={"description_width": "initial"}, placeholder="rows of 0/1, e.g. 1100 1110 ...",
                                   continuous_update=False, layout=widgets.Layout(width="420px"))
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self._updating = False
        self.lengths.observe(lambda change: self._new_lengths(), names="value")
        for w in (self.row, self.padding, self.causal, self.custom):
            w.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.lengths, self.row]), widgets.HBox([self.padding, self.causal]),
                                    self.custom, self.message, self.plot])
        self._new_lengths()

    def _new_lengths(self):
        try:
            count = len(parse_lengths(self.lengths.value))
        except ValueError:
            count = 0
        self._updating = True
        try:
            keep = self.row.value if self.row.value is not None and self.row.value < count else 0
            self.row.options = [(f"sequence {i}", i) for i in range(count)]
            self.row.value = keep if count else None
        finally:
            self._updating = False
        self.render()

    def _fail(self, html):
        self.mask, self.weights, self.figure = None, None, None
        self.message.value = html
        self.plot.clear_output()

    def _call(self, fn, what, *args):
        """Run a student function; on failure return (None, message html)."""
        try:
            return fn(*args), None
        except NotImplementedError:
            return None, message_html(f"{what} is not finished yet (NotImplementedError): complete that exercise, "
                                      "re-run its cell, then this one.", "todo")
        except Exception as error:  # never a traceback inside the widget
            return None, explain_failure(error)

    def render(self):
        """Build the mask, run attention, redraw; never raises."""
        if self._updating:
            return
        try:
            lengths = parse_lengths(self.lengths.value)
        except ValueError as error:
            return self._fail(message_html(str(error), "error"))
        batch, max_len = len(lengths), max(lengths)
        if max_len == 0:
            return self._fail(message_html("Every sequence has length 0: there is nothing to attend to. "
                                           "Give at least one sequence a positive length.", "error"))
        try:
            custom = parse_mask(self.custom.value, max_len)
        except ValueError as error:
            return self._fail(message_html(str(error), "error"))
        mask = torch.ones(batch, max_len, max_len, dtype=torch.bool)
        if self.padding.value:
            padding, failure = self._call(self.padding_mask_fn, "padding_mask (Exercise 1)",
                                          torch.tensor(lengths), max_len)
            if failure:
                return self._fail(failure)
            if tuple(getattr(padding, "shape", ())) != (batch, max_len):
                return self._fail(message_html(f"padding_mask returned shape {tuple(getattr(padding, 'shape', ()))}; "
                                               f"expected (B, max_len) = ({batch}, {max_len}).", "error"))
            mask = mask & padding.bool()[:, None, :]
        if self.causal.value:
            causal, failure = self._call(self.causal_mask_fn, "causal_mask (Exercise 2)", max_len)
            if failure:
                return self._fail(failure)
            if tuple(getattr(causal, "shape", ())) != (max_len, max_len):
                return self._fail(message_html(f"causal_mask returned shape {tuple(getattr(causal, 'shape', ()))}; "
                                               f"expected (L, L) = ({max_len}, {max_len}).", "error"))
            mask = mask & causal.bool()
        if custom is not None:
            mask = mask & custom
        q, k, v = (t[:batch, :max_len] for t in (self._q, self._k, self._v))
        result, failure = self._call(self.attention_fn, "masked_attention (Exercise 4)", q, k, v, mask)
        if failure:
            return self._fail(failure)
        weights = result[1]
        weights = np.asarray(weights.detach() if torch.is_tensor(weights) else weights, dtype=float)
        if weights.shape != (batch, max_len, max_len):
            return self._fail(message_html(f"masked_attention returned weights of shape {weights.shape}; "
                                           f"expected (B, L, L) = ({batch}, {max_len}, {max_len}).", "error"))
        self.mask, self.weights = mask, weights
        row = self.row.value if self.row.value is not None else 0
        self._draw(q, k, mask, weights, row, lengths[row])  # the figure first, then the caption
        self._describe(lengths, row)

    def _describe(self, lengths, row):
        weights, mask = self.weights[row], self.mask[row].numpy()
        empty = [i for i in range(mask.shape[0]) if not mask[i].any()]
        notes = [f"sequence {row}: length {lengths[row]} of {mask.shape[0]}; "
                 f"{int(mask.sum())} of {mask.size} query-key pairs allowed."]
        if np.isnan(self.weights).any():
            notes.append("Some weights in the batch are NaN: a query with every key masked must get zeros, not NaN.")
        if empty:
            notes.append(f"Queries {empty} have every key masked: by the course convention their weights "
                         f"(and outputs) are all zero, shown as an empty grey row.")
        if lengths[row] == 0:
            notes.append("This sequence has length 0, so with the padding mask on, nothing in it can be attended to.")
        sums = weights.sum(-1)
        live = [i for i in range(len(sums)) if i not in empty]
        if live and np.allclose(sums[live], 1.0, atol=1e-5):
            notes.append("Every row with an allowed key sums to 1: the softmax renormalised the remaining weights.")
        elif live:
            notes.append(f"Rows should sum to 1 over the allowed keys, but they sum to {np.round(sums[live], 3)}.")
        kind = "error" if np.isnan(self.weights).any() or "should" in notes[-1] else "info"
        self.message.value = message_html(" ".join(notes), kind)

    def _draw(self, q, k, mask, weights, row, length):
        scores = (q[row] @ k[row].T / q.shape[-1] ** 0.5).numpy()
        unmasked = np.exp(scores - scores.max(-1, keepdims=True))
        unmasked /= unmasked.sum(-1, keepdims=True)
        allowed = mask[row].numpy()
        cmap = plt.get_cmap("viridis").with_extremes(bad="#d0d0d0")
        n = allowed.shape[0]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
        panels = [(unmasked, "without a mask"), (np.ma.masked_where(~allowed, weights[row]),
                                                 "with the mask (grey = masked), renormalised")]
        for ax, (matrix, title) in zip(axes, panels):
            image = ax.imshow(matrix, cmap=cmap, vmin=0, vmax=1)
            for i in range(n):
                for j in range(n):
                    if not np.ma.is_masked(matrix[i, j]) and n <= 10:
                        ax.text(j, i, f"{matrix[i, j]:.2f}"[1:] if matrix[i, j] < 1 else "1", ha="center",
                                va="center", fontsize=7, color="white" if matrix[i, j] < 0.6 else "black")
            ax.set_xticks(range(n), [f"{j}" + ("·" if j >= length else "") for j in range(n)])
            ax.set_yticks(range(n), range(n))
            ax.set(title=title, xlabel="key position (· = padding)", ylabel="query position")
        fig.colorbar(image, ax=axes, fraction=0.025, pad=0.02)
        self.figure = fig
        show_figure(self.plot, fig)


def mask_explorer(padding_mask_fn, causal_mask_fn, attention_fn, lengths="6 4 0"):
    """Build and return a MaskExplorer; display it by leaving it last in a cell."""
    return MaskExplorer(padding_mask_fn, causal_mask_fn, attention_fn, lengths)
