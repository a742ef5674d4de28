"""Lesson 6's explorer: the sinusoidal positional encoding, one position and one dimension at a time.

It draws what the notebook's own `sinusoidal_positional_encoding(max_len, d_model)`
returns (it holds no copy of the answer):
the encoding matrix with the chosen position (row) and dimension (column) marked,
that dimension as a wave over positions, the ladder of wavelengths, and the dot
product PE(t) . PE(t + k) against the offset k.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from .common import Explorer, explain_failure, message_html, show_figure

MAX_D_MODEL = 1024
MAX_LEN = 2048


class PositionalEncodingExplorer(Explorer):
    """Text boxes for d_model and max_len; sliders for the position t and the dimension j.

    pe_fn(max_len, d_model) -> (max_len, d_model) tensor: the student's encoding.
    base: the base of the wavelengths (10000), used only to label the ladder.
    Attributes for driving it from code: d_model, max_len (Text), position, dimension
    (IntSlider), message (HTML), plot (Output); after each render, pe (numpy
    (max_len, d_model)), similarity (numpy, PE(t) . PE(t + k) for k = -t .. max_len-1-t)
    and figure.
    """

    def __init__(self, pe_fn, d_model=64, max_len=100, base=10000.0):
        self.pe_fn, self.base = pe_fn, base
        self.pe, self.similarity, self.figure = None, None, None
        self.d_model = widgets.Text(value=str(d_model), description="d_model", continuous_update=False,
                                    layout=widgets.Layout(width="180px"))
        self.max_len = widgets.Text(value=str(max_len), description="max_len", continuous_update=False,
                                    layout=widgets.Layout(width="180px"))
        self.position = widgets.IntSlider(value=min(10, max_len - 1), min=0, max=max_len - 1,
                                          description="position t", continuous_update=False)
        self.dimension = widgets.IntSlider(value=0, min=0, max=d_model - 1, description="dimension j",
                                           continuous_update=False)
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self._busy = False
        for w in (self.d_model, self.max_len, self.position, self.dimension):
            w.observe(lambda change: self.update(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.d_model, self.max_len]),
                                    widgets.HBox([self.position, self.dimension]), self.message, self.plot])
        self.update()

    @staticmethod
    def _parse_int(text, name, low, high):
        text = text.strip()
        if not text:
            return None, f"{name} is empty: type a whole number from {low} to {high}."
        try:
            value = int(text)
        except ValueError:
            return None, f"{name} must be a whole number from {low} to {high}, not {text!r}."
        if not low <= value <= high:
            return None, f"{name} must be from {low} to {high}; got {value}."
        return value, None

    def _fail(self, html):
        self.message.value = html
        self.pe, self.similarity = None, None
        self.plot.clear_output()

    def update(self):
        if self._busy:
            return
        d_model, problem = self._parse_int(self.d_model.value, "d_model", 2, MAX_D_MODEL)
        if problem is None:
            max_len, problem = self._parse_int(self.max_len.value, "max_len", 1, MAX_LEN)
        if problem:
            return self._fail(message_html(problem, "error"))
        try:
            pe = self.pe_fn(max_len, d_model)
            pe = (pe.detach().cpu().numpy() if torch.is_tensor(pe) else np.asarray(pe)).astype(float)
            if pe.shape != (max_len, d_model):
                raise ValueError(f"sinusoidal_positional_encoding({max_len}, {d_model}) returned shape "
                                 f"{pe.shape}; expected ({max_len}, {d_model}).")
            if not np.isfinite(pe).all():
                raise ValueError("the encoding contains NaN or infinite values.")
        except Exception as error:  # the explorer must never show a traceback
            return self._fail(explain_failure(error))
        self._busy = True
        try:  # keep the sliders inside the new ranges
            self.position.max = max_len - 1
            self.dimension.max = d_model - 1
        finally:
            self._busy = False
        self.pe = pe
        t, j = self.position.value, self.dimension.value
        self.similarity = pe @ pe[t]  # PE(s) . PE(t) for every s, i.e. offsets k = s - t
        pair = j // 2
        wavelength = 2 * np.pi * self.base ** (2 * pair / d_model)
        kind = "sine" if j % 2 == 0 else "cosine"
        self.message.value = message_html(
            f"Dimension {j} is the {kind} of pair {pair}: with base {self.base:g} its wavelength is "
            f"2π·{self.base:g}^({2 * pair}/{d_model}) ≈ {wavelength:,.1f} positions. "
            f"PE({t})[{j}] = {pe[t, j]:+.3f}. PE(t)·PE(t) = {pe[t] @ pe[t]:.1f} (d_model/2 = {d_model / 2:g} "
            "for an even d_model).", "info")
        self._draw(t, j, d_model, max_len)

    def _draw(self, t, j, d_model, max_len):
        pe = self.pe
        fig, axes = plt.subplots(2, 2, figsize=(12, 7))
        ax_map, ax_wave, ax_ladder, ax_sim = axes.ravel()
        image = ax_map.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        ax_map.axhline(t, color="#00c000", lw=2)
        ax_map.axvline(j, color="#00c000", lw=2, ls="--")
        ax_map.set(title=f"PE: row t = {t} and column j = {j} in green", xlabel="dimension j", ylabel="position t")
        fig.colorbar(image, ax=ax_map, fraction=0.046, pad=0.04)

        positions = np.arange(max_len)
        ax_wave.plot(positions, pe[:, j], color="#1b9e77", marker="." if max_len <= 64 else None)
        ax_wave.plot([t], [pe[t, j]], "o", color="#d95f02", ms=8)
        ax_wave.set(title=f"dimension {j} against position", xlabel="position t", ylabel=f"PE(t)[{j}]",
                    ylim=(-1.15, 1.15))
        ax_wave.grid(alpha=0.3)

        pairs = np.arange(d_model // 2)
        wavelengths = 2 * np.pi * self.base ** (2 * pairs / d_model)
        colours = ["#d95f02" if p == j // 2 else "#7570b3" for p in pairs]
        ax_ladder.bar(pairs, wavelengths, color=colours)
        ax_ladder.set_yscale("log")
        ax_ladder.axhline(max_len, color="grey", ls=":", label=f"max_len = {max_len}")
        ax_ladder.set(title="the wavelength ladder (one rung per sin/cos pair)", xlabel="pair i (dimensions 2i, 2i+1)",
                      ylabel="wavelength (positions)")
        ax_ladder.legend(loc="upper left")
        ax_ladder.grid(axis="y", alpha=0.3)

        offsets = positions - t
        ax_sim.plot(offsets, self.similarity, color="#7570b3")
        ax_sim.axvline(0, color="#d95f02", ls="--", lw=1)
        ax_sim.set(title=f"similarity PE(t)·PE(t+k) for t = {t}", xlabel="offset k", ylabel="dot product")
        ax_sim.grid(alpha=0.3)
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def positional_encoding_explorer(pe_fn, d_model=64, max_len=100, base=10000.0):
    """Build and return a PositionalEncodingExplorer; display it by leaving it last in a cell."""
    return PositionalEncodingExplorer(pe_fn, d_model, max_len, base)
