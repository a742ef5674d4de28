"""Lesson 5's explorer: pick a model, a layer and a head, and see that head's attention map.

The notebook passes one function per trained model. Each takes a (1, L) int64
tensor of token ids and returns the attention weights of every layer, one
(H, L, L) tensor (or (1, H, L, L)) per layer. Optional `patterns` name the
look-ups a head may have learned, as functions length -> the key index each
query should look at; the message reports how many queries follow each one.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from ..plotting import plot_attention
from .common import Explorer, explain_failure, message_html, show_figure, token_spans


class HeadExplorer(Explorer):
    """Dropdowns for the model, the layer and the head; a text box for the example.

    maps_fns: {model name: fn(ids (1, L) int64) -> list of per-layer weights (H, L, L)}
    symbols:  the alphabet of the task (a string of one-character symbols or a list)
    length:   the sequence length the models were trained on (None: any length up to max_len)
    patterns: {name: fn(length) -> list of key positions, one per query}, reported in the message
    Attributes for driving it from code: model, layer, head (Dropdowns), sequence (Text),
    random_button (Button), message (HTML), plot (Output); after each render, tokens,
    weights (the chosen head's (L, L) numpy map), all_weights (list of (H, L, L)) and figure.
    """

    def __init__(self, maps_fns, symbols, length=None, patterns=None, max_len=32, seed=0):
        if not maps_fns:
            raise ValueError("maps_fns: expected at least one model, got an empty dict")
        self.maps_fns = dict(maps_fns)
        self.symbols = list(symbols)
        self.length, self.max_len = length, max_len
        self.patterns = dict(patterns or {})
        self.generator = np.random.default_rng(seed)
        self.tokens, self.weights, self.all_weights, self.figure = [], None, [], None
        self.model = widgets.Dropdown(options=list(self.maps_fns), description="model")
        self.layer = widgets.Dropdown(options=[("layer 1", 0)], value=0, description="layer")
        self.head = widgets.Dropdown(options=[("head 1", 0)], value=0, description="head")
        self.sequence = widgets.Text(value=" ".join(self._random_tokens()), description="example",
                                     continuous_update=False,
                                     layout=widgets.Layout(width="420px"))
        self.random_button = widgets.Button(description="random example")
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self._busy = False
        self.model.observe(lambda change: self.update(), names="value")
        self.layer.observe(lambda change: self.update(), names="value")
        self.head.observe(lambda change: self.update(), names="value")
        self.sequence.observe(lambda change: self.update(), names="value")
        self.random_button.on_click(self._random)
        self.widget = widgets.VBox([widgets.HBox([self.model, self.layer, self.head]),
                                    widgets.HBox([self.sequence, self.random_button]),
                                    self.message, self.plot])
        self.update()

    def _random_tokens(self):
        n = self.length or min(8, self.max_len)
        return [str(s) for s in self.generator.choice(self.symbols, size=n)]

    def _random(self, _button=None):
        self.sequence.value = " ".join(self._random_tokens())

    def _parse(self, text):
        """Token ids (1, L) for the text, or an error message."""
        tokens = text.split()
        if not tokens:
            return None, "Type an example: symbols separated by spaces, or press 'random example'."
        unknown = sorted({t for t in tokens if t not in self.symbols})
        if unknown:
            return None, (f"{', '.join(repr(t) for t in unknown)} not in the alphabet. "
                          f"Use only: {' '.join(self.symbols)}.")
        if self.length is not None and len(tokens) != self.length:
            return None, (f"These models were trained on sequences of exactly {self.length} symbols; "
                          f"this example has {len(tokens)}.")
        if len(tokens) > self.max_len:
            return None, f"At most {self.max_len} symbols, please; this example has {len(tokens)}."
        ids = torch.tensor([[self.symbols.index(t) for t in tokens]], dtype=torch.long)
        return (tokens, ids), None

    def _set_options(self, widget, label, count):
        options = [(f"{label} {i + 1}", i) for i in range(count)]
        if [o[1] for o in widget.options] != list(range(count)):
            keep = widget.value if widget.value is not None and widget.value < count else 0
            widget.options = options
            widget.value = keep

    def _fail(self, html):
        self.message.value = html
        self.weights = None
        self.plot.clear_output()

    def update(self):
        if self._busy:  # changing the layer/head options fires observers: render once
            return
        parsed, problem = self._parse(self.sequence.value)
        if problem:
            return self._fail(message_html(problem, "error"))
        tokens, ids = parsed
        try:
            with torch.no_grad():
                maps = self.maps_fns[self.model.value](ids)
            maps = [torch.as_tensor(m).detach().cpu().float() for m in maps]
            maps = [m[0] if m.dim() == 4 else m for m in maps]
            for i, m in enumerate(maps):
                if m.dim() != 3 or tuple(m.shape[1:]) != (len(tokens), len(tokens)):
                    raise ValueError(f"layer {i + 1}: expected attention weights of shape (heads, {len(tokens)}, "
                                     f"{len(tokens)}), got {tuple(m.shape)}")
            if not maps:
                raise ValueError("the model returned no attention maps")
        except Exception as error:  # the explorer must never show a traceback
            return self._fail(explain_failure(error))
        self._busy = True
        try:
            self._set_options(self.layer, "layer", len(maps))
            self._set_options(self.head, "head", maps[self.layer.value].shape[0])
        finally:
            self._busy = False
        self.tokens, self.all_weights = tokens, [m.numpy() for m in maps]
        self.weights = self.all_weights[self.layer.value][self.head.value]
        self.message.value = self._describe(tokens) + token_spans(tokens)
        self._draw(tokens)

    def _describe(self, tokens):
        n = len(tokens)
        strongest = self.weights.argmax(axis=1)
        parts = []
        for name, pattern in self.patterns.items():
            expected = np.asarray(pattern(n))
            parts.append(f"{name}: {int((strongest == expected).sum())}/{n} queries")
        where = f"{self.model.value}, layer {self.layer.value + 1}, head {self.head.value + 1}"
        detail = ("; strongest key matches " + ", ".join(parts)) if parts else ""
        return message_html(f"{where}: each row is a query, each column a key{detail}.", "info")

    def _draw(self, tokens):
        labels = [f"{t}{i}" for i, t in enumerate(tokens)]
        size = max(3.5, 0.45 * len(tokens) + 1.8)
        fig, ax = plt.subplots(figsize=(size, size * 0.8))
        plot_attention(self.weights, labels, labels, ax=ax, xlabel="key (symbol, position)",
                       ylabel="query (symbol, position)",
                       title=f"{self.model.value}: layer {self.layer.value + 1}, head {self.head.value + 1}")
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def head_explorer(maps_fns, symbols, length=None, patterns=None, max_len=32):
    """Build and return a HeadExplorer; display it by leaving it last in a cell."""
    return HeadExplorer(maps_fns, symbols, length, patterns, max_len)
