"""Lesson 7's explorer: a trained Transformer's attention, layer by layer and head by head.

The notebook passes one function per trained model. Each takes a list of
tokens (what the student typed) and returns the model's attention maps:

    {kind: (query_labels, key_labels, [per-layer weights (H, L_q, L_k)])}

for instance {"encoder self-attention": ..., "decoder self-attention": ...,
"cross-attention": ...} for an encoder-decoder, {"self-attention": ...} for a
decoder-only model. The explorer shows one head of one layer of one kind.
The "highlight the induction head" toggle looks, among the self-attention maps,
for the head that puts most weight on *the token after the previous occurrence
of the current token* (Olsson et al., 2022), jumps to it and outlines those
cells on the map.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from ..plotting import plot_attention
from .common import Explorer, explain_failure, message_html, show_figure, token_spans


def induction_targets(tokens):
    """For each query t, the keys an induction head looks at: j + 1 for every j < t with tokens[j] == tokens[t].

    Returns a list (one entry per position) of lists of key positions (empty when the
    current token has not occurred before).
    """
    return [[j + 1 for j in range(t) if tokens[j] == tokens[t] and j + 1 <= t] for t in range(len(tokens))]


def induction_scores(weights, tokens):
    """Mean weight that each head puts on the induction targets, over the queries that have one.

    weights: (H, L, L) array of one layer's self-attention; tokens: the L tokens.
    Returns an (H,) array, or None when no token repeats.
    """
    targets = induction_targets(tokens)
    rows = [(t, keys) for t, keys in enumerate(targets) if keys]
    if not rows:
        return None
    weights = np.asarray(weights)
    return np.mean([weights[:, t, keys].sum(axis=-1) for t, keys in rows], axis=0)


class TransformerExplorer(Explorer):
    """Dropdowns for the model, the kind of attention, the layer and the head; a text box for the input.

    maps_fns: {model name: fn(tokens (list of str)) -> {kind: (query_labels, key_labels, [(H, Lq, Lk), ...])}}
    symbols:  {model name: the alphabet it accepts} or one alphabet for every model
    examples: {model name: fn(rng) -> list of tokens}, the "random example" of each model
    max_len:  {model name: the longest input it accepts} or one number
    Attributes for driving it from code: model, kind, layer, head (Dropdowns), sequence (Text),
    random_button (Button), induction (ToggleButton), message (HTML), plot (Output); after each
    render: tokens, maps, weights (the shown (Lq, Lk) numpy map), scores (induction score of
    each head of the shown layer, or None) and figure.
    """

    def __init__(self, maps_fns, symbols, examples=None, max_len=50, seed=0):
        if not maps_fns:
            raise ValueError("maps_fns: expected at least one model, got an empty dict")
        self.maps_fns = dict(maps_fns)
        names = list(self.maps_fns)
        self.symbols = {n: [str(s) for s in (symbols[n] if isinstance(symbols, dict) else symbols)] for n in names}
        self.max_len = {n: (max_len[n] if isinstance(max_len, dict) else max_len) for n in names}
        self.examples = dict(examples or {})
        self.rng = np.random.default_rng(seed)
        self.tokens, self.maps, self.weights, self.scores, self.figure = [], {}, None, None, None
        self.model = widgets.Dropdown(options=names, description="model")
        self.kind = widgets.Dropdown(options=[("self-attention", "self-attention")], description="attention",
                                     layout=widgets.Layout(width="300px"))
        self.layer = widgets.Dropdown(options=[("layer 1", 0)], value=0, description="layer")
        self.head = widgets.Dropdown(options=[("head 1", 0)], value=0, description="head")
        self.sequence = widgets.Text(value=" ".join(self._example(names[0])), description="input",
                                     continuous_update=False, layout=widgets.Layout(width="520px"))
        self.random_button = widgets.Button(description="random example")
        self.induction = widgets.ToggleButton(value=False, description="highlight the induction head",
                                              layout=widgets.Layout(width="220px"))
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self._busy = False
        self._jump = False  # jump to the induction head on the next render
        for control in (self.kind, self.layer, self.head):
            control.observe(lambda change: self.update(), names="value")
        self.sequence.observe(lambda change: self.update(jump=self.induction.value), names="value")
        self.induction.observe(lambda change: self.update(jump=change["new"]), names="value")
        self.model.observe(self._new_model, names="value")
        self.random_button.on_click(self._random)
        self.widget = widgets.VBox([widgets.HBox([self.model, self.kind]),
                                    widgets.HBox([self.layer, self.head, self.induction]),
                                    widgets.HBox([self.sequence, self.random_button]),
                                    self.message, self.plot])
        self.update()

    # ---------------------------------------------------------------- input
    def _example(self, name):
        if name in self.examples:
            return [str(t) for t in self.examples[name](self.rng)]
        n = min(8, self.max_len[name])
        return [str(s) for s in self.rng.choice(self.symbols[name], size=n)]

    def _random(self, _button=None):
        self.sequence.value = " ".join(self._example(self.model.value))

    def _new_model(self, _change=None):
        tokens = self.sequence.value.split()
        if not tokens or any(t not in self.symbols[self.model.value] for t in tokens):
            self._busy = True
            try:
                self.sequence.value = " ".join(self._example(self.model.value))
            finally:
                self._busy = False
        self.update(jump=self.induction.value)

    def _parse(self, text):
        name = self.model.value
        tokens = text.split()
        if not tokens:
            return None, "Type an input: symbols separated by spaces, or press 'random example'."
        unknown = sorted({t for t in tokens if t not in self.symbols[name]})
        if unknown:
            return None, (f"{', '.join(repr(t) for t in unknown)} not in the alphabet of '{name}'. "
                          f"Use only: {' '.join(self.symbols[name])}.")
        if len(tokens) > self.max_len[name]:
            return None, f"'{name}' takes at most {self.max_len[name]} symbols; this input has {len(tokens)}."
        return tokens, None

    # ---------------------------------------------------------------- rendering
    def _set_options(self, widget, options):
        values = [v for _, v in options]
        current = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        if current != values:
            keep = widget.value if widget.value in values else values[0]
            widget.options = options
            widget.value = keep

    def _fail(self, html):
        self.message.value = html
        self.weights, self.scores = None, None
        self.plot.clear_output()

    def _compute(self, tokens):
        maps = self.maps_fns[self.model.value](tokens)
        if not isinstance(maps, dict) or not maps:
            raise ValueError("the model function returned no attention maps")
        checked = {}
        for kind, (query_labels, key_labels, layers) in maps.items():
            layers = [torch.as_tensor(m).detach().cpu().float() for m in layers]
            layers = [m[0] if m.dim() == 4 else m for m in layers]
            if not layers:
                raise ValueError(f"{kind}: no layers")
            for i, m in enumerate(layers):
                if m.dim() != 3 or tuple(m.shape[1:]) != (len(query_labels), len(key_labels)):
                    raise ValueError(f"{kind}, layer {i + 1}: expected attention weights of shape (heads, "
                                     f"{len(query_labels)}, {len(key_labels)}), got {tuple(m.shape)}")
            checked[kind] = (list(query_labels), list(key_labels), [m.numpy() for m in layers])
        return checked

    def _self_kinds(self):
        return [k for k, (q, key, _) in self.maps.items() if "self" in k and len(q) == len(key)]

    def _best_induction_head(self, tokens):
        """(kind, layer, head, score) of the head with the highest induction score, or None."""
        best = None
        for kind in self._self_kinds():
            query_labels, _, layers = self.maps[kind]
            seq = self._sequence_of(kind, tokens)
            for layer, weights in enumerate(layers):
                scores = induction_scores(weights, seq)
                if scores is None:
                    continue
                head = int(np.argmax(scores))
                if best is None or scores[head] > best[3]:
                    best = (kind, layer, head, float(scores[head]))
        return best

    def _sequence_of(self, kind, tokens):
        """The tokens whose repeats define induction targets for a self-attention map: its query labels."""
        return [str(label) for label in self.maps[kind][0]]

    def update(self, jump=False):
        """Render the chosen map; with jump=True (the toggle just pressed, or a new input while it is on)
        first move the menus to the induction head."""
        self._jump = self._jump or jump
        if self._busy:
            return
        tokens, problem = self._parse(self.sequence.value)
        if problem:
            return self._fail(message_html(problem, "error"))
        try:
            with torch.no_grad():
                self.maps = self._compute(tokens)
        except Exception as error:  # the explorer must never show a traceback
            return self._fail(explain_failure(error))
        self.tokens = tokens
        note = ""
        self._busy = True
        try:
            self._set_options(self.kind, [(k, k) for k in self.maps])
            jump, self._jump = self.induction.value and self._jump, False
            if jump:
                best = self._best_induction_head(tokens)
                if best is None:
                    note = "No token repeats in this input, so no head can look for a previous occurrence. "
                else:
                    self._set_options(self.kind, [(k, k) for k in self.maps])
                    self.kind.value = best[0]
            layers = self.maps[self.kind.value][2]
            self._set_options(self.layer, [(f"layer {i + 1}", i) for i in range(len(layers))])
            if jump and not note:
                self.layer.value = best[1]
            self._set_options(self.head, [(f"head {i + 1}", i) for i in range(layers[self.layer.value].shape[0])])
            if jump and not note:
                self.head.value = best[2]
        finally:
            self._busy = False
        query_labels, key_labels, layers = self.maps[self.kind.value]
        self.weights = layers[self.layer.value][self.head.value]
        self.scores = (induction_scores(layers[self.layer.value], self._sequence_of(self.kind.value, tokens))
                       if self.kind.value in self._self_kinds() else None)
        self.message.value = self._describe(note) + token_spans(tokens)
        self._draw(query_labels, key_labels)

    def _describe(self, note):
        where = f"{self.model.value}, {self.kind.value}, layer {self.layer.value + 1}, head {self.head.value + 1}"
        text = f"{note}{where}: each row is a query, each column a key."
        if self.scores is not None:
            per_head = ", ".join(f"head {h + 1}: {s:.2f}" for h, s in enumerate(self.scores))
            text += f" Weight on 'the token after the previous occurrence', per head of this layer: {per_head}."
        return message_html(text, "info")

    def _draw(self, query_labels, key_labels):
        queries = [f"{t}:{i}" for i, t in enumerate(query_labels)]
        keys = [f"{t}:{i}" for i, t in enumerate(key_labels)]
        width = min(14.0, max(3.5, 0.3 * len(keys) + 2.0))
        height = min(12.0, max(3.0, 0.3 * len(queries) + 1.5))
        fig, ax = plt.subplots(figsize=(width, height))
        plot_attention(self.weights, keys, queries, ax=ax, xlabel="key (token:position)",
                       ylabel="query (token:position)",
                       title=f"{self.model.value}: {self.kind.value}, layer {self.layer.value + 1}, "
                             f"head {self.head.value + 1}")
        if self.induction.value and self.scores is not None:
            for t, targets in enumerate(induction_targets(self._sequence_of(self.kind.value, self.tokens))):
                for j in targets:
                    ax.add_patch(Rectangle((j - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="#ff3030", lw=1.5))
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def transformer_explorer(maps_fns, symbols, examples=None, max_len=50):
    """Build and return a TransformerExplorer; display it by leaving it last in a cell."""
    return TransformerExplorer(maps_fns, symbols, examples, max_len)
