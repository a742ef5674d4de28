"""Lesson 3's explorer: type a sentence, pick a query token, see where it attends.

The word vectors here are *constructed by hand*, not learned: each word has a
few named features (is it a thing, an animal, a liquid, a pronoun, ...), and
W_Q is written so that a pronoun's query asks for a thing, and the adjective
that follows the pronoun ("tired", "sour") adds a wish for an animal or a
liquid. That makes the picture readable ("it" looks at "cat" in "... because it
was tired" and at "milk" in "... because it was sour"), which a trained model's
raw attention rarely is.
"""
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from ..plotting import plot_attention
from .common import Explorer, explain_failure, message_html, show_figure

FEATURES = ("thing", "animal", "liquid", "pronoun", "wants animal", "wants liquid", "verb", "function")
_F = {name: i for i, name in enumerate(FEATURES)}

_LEXICON = {
    # nouns
    "cat": ("thing", "animal"), "dog": ("thing", "animal"), "bird": ("thing", "animal"),
    "milk": ("thing", "liquid"), "water": ("thing", "liquid"), "juice": ("thing", "liquid"),
    # pronouns
    "it": ("pronoun",),
    # adjectives that describe an animal / a liquid
    "tired": ("wants animal",), "hungry": ("wants animal",), "sleepy": ("wants animal",),
    "full": ("wants animal",), "sour": ("wants liquid",), "cold": ("wants liquid",),
    "spoiled": ("wants liquid",), "warm": ("wants liquid",),
    # verbs
    "drink": ("verb",), "drank": ("verb",), "like": ("verb",), "liked": ("verb",), "want": ("verb",),
    "wanted": ("verb",), "did": ("verb", "function"),
    # function words
    "the": ("function",), "a": ("function",), "not": ("function",), "because": ("function",),
    "was": ("function",), "is": ("function",), "and": ("function",), "so": ("function",),
}
VOCABULARY = tuple(sorted(_LEXICON))
EXAMPLES = (
    "the cat did not drink the milk because it was tired",
    "the cat did not drink the milk because it was sour",
    "the dog liked the water because it was cold",
    "the bird drank the juice because it was hungry",
)
MAX_TOKENS = 20


def tokenize(sentence):
    """Lower-case, split on spaces, drop a final full stop: 'The cat.' -> ['the', 'cat']."""
    return sentence.lower().replace(".", " ").replace(",", " ").split()


def embed(tokens):
    """Hand-made, *contextual* word vectors: (L, len(FEATURES)) float32.

    Each word gets its lexicon features. A pronoun also receives the "wants"
    features of the adjectives in its sentence, as if an earlier layer had
    already read "it was tired" and passed that on to "it".
    Raises KeyError for a word outside VOCABULARY.
    """
    unknown = [t for t in tokens if t not in _LEXICON]
    if unknown:
        raise KeyError(unknown)
    x = np.zeros((len(tokens), len(FEATURES)), dtype=np.float32)
    for i, tok in enumerate(tokens):
        for name in _LEXICON[tok]:
            x[i, _F[name]] = 1.0
    wants = x[:, [_F["wants animal"], _F["wants liquid"]]].sum(axis=0).clip(max=1.0)
    for i, tok in enumerate(tokens):
        if "pronoun" in _LEXICON[tok]:
            x[i, [_F["wants animal"], _F["wants liquid"]]] = wants
    return x


def projections():
    """The hand-written (W_Q, W_K, W_V), each (8, 8): q = x @ W_Q, k = x @ W_K, v = x @ W_V.

    Keys are the features themselves (W_K = I). A query asks for features:
    a pronoun asks for a thing, "wants animal" for an animal, "wants liquid"
    for a liquid, a verb for a thing (its subject or object), a noun for a verb.
    """
    d = len(FEATURES)
    w_q = np.zeros((d, d), dtype=np.float32)
    w_q[_F["pronoun"], _F["thing"]] = 4.0
    w_q[_F["wants animal"], _F["animal"]] = 6.0
    w_q[_F["wants liquid"], _F["liquid"]] = 6.0
    w_q[_F["verb"], _F["thing"]] = 3.0
    w_q[_F["thing"], _F["verb"]] = 3.0
    return w_q, np.eye(d, dtype=np.float32), np.eye(d, dtype=np.float32)


def reference_attention(q, k, v):
    """Scaled dot-product attention with PyTorch's own operator; returns (output, weights).

    q: (..., L_q, d_k), k: (..., L_k, d_k), v: (..., L_k, d_v). The weights come
    from the same operator applied to identity "values": softmax(QK^T/sqrt(d_k)) I.
    """
    output = F.scaled_dot_product_attention(q, k, v)
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1], k.shape[-2])
    weights = F.scaled_dot_product_attention(q, k, eye)
    return output, weights


class AttentionExplorer(Explorer):
    """A sentence box, a query-token menu and a temperature slider over hand-made embeddings.

    attention_fn(q, k, v) -> (output, weights) with q, k, v of shape (1, L, 8):
    the notebook passes the student's scaled_dot_product_attention. If it
    raises NotImplementedError (or is None), the explorer uses PyTorch's
    operator instead and says so. The temperature tau divides the scores:
    softmax(QK^T / (sqrt(d_k) * tau)).
    Attributes for driving it from code: sentence (Text), examples (Dropdown),
    query (Dropdown of token positions), temperature (FloatSlider), message
    (HTML), plot (Output), and after each render: tokens, weights (L, L numpy),
    used_reference (bool), figure (the last matplotlib figure, closed).
    """

    def __init__(self, attention_fn=None, sentence=EXAMPLES[0]):
        self.attention_fn = attention_fn
        self.tokens, self.weights, self.figure, self.used_reference = [], None, None, False
        self.sentence = widgets.Text(value=sentence, description="sentence",
                                     layout=widgets.Layout(width="520px"))
        self.examples = widgets.Dropdown(options=("(type your own)",) + EXAMPLES,
                                         value=sentence if sentence in EXAMPLES else "(type your own)",
                                         description="examples", layout=widgets.Layout(width="520px"))
        self.query = widgets.Dropdown(options=[], description="query token")
        self.temperature = widgets.FloatSlider(value=1.0, min=0.1, max=4.0, step=0.1, description="temperature",
                                               continuous_update=False, readout_format=".1f",
                                               style={"description_width": "initial"})
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self._updating = False
        self.examples.observe(self._pick_example, names="value")
        self.sentence.observe(lambda change: self._new_sentence(), names="value")
        self.query.observe(lambda change: self.render(), names="value")
        self.temperature.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([self.examples, self.sentence,
                                    widgets.HBox([self.query, self.temperature]), self.message, self.plot])
        self._new_sentence()

    def _pick_example(self, change):
        if change["new"] in EXAMPLES:
            self.sentence.value = change["new"]

    def _new_sentence(self):
        tokens = tokenize(self.sentence.value)
        options = [(f"{i}: {tok}", i) for i, tok in enumerate(tokens)]
        default = tokens.index("it") if "it" in tokens else 0
        self._updating = True  # one render for the whole change, not one per option
        try:
            self.query.options = options
            self.query.value = default if options else None
        finally:
            self._updating = False
        self.render()

    def _fail(self, text, kind="error"):
        self.weights, self.figure = None, None
        self.message.value = message_html(text, kind)
        self.plot.clear_output()

    def render(self):
        """Recompute the weights for the current inputs and redraw; never raises."""
        if self._updating:
            return
        tokens = tokenize(self.sentence.value)
        self.tokens = tokens
        if not tokens:
            return self._fail("The sentence is empty: type a few words, for instance: " + EXAMPLES[0])
        if len(tokens) > MAX_TOKENS:
            return self._fail(f"The sentence has {len(tokens)} words; this explorer takes at most {MAX_TOKENS}.")
        try:
            x = embed(tokens)
        except KeyError as error:
            return self._fail(f"Unknown word(s) {', '.join(error.args[0])}. The hand-made embeddings cover only: "
                              + " ".join(VOCABULARY))
        w_q, w_k, w_v = projections()
        tau = float(self.temperature.value)
        if not tau > 0:
            return self._fail(f"temperature: expected a positive number, got {tau}")
        as_tensor = lambda a: torch.from_numpy(a).unsqueeze(0)  # noqa: E731  (1, L, 8)
        q, k, v = as_tensor(x @ w_q / tau), as_tensor(x @ w_k), as_tensor(x @ w_v)
        note = ""
        self.used_reference = self.attention_fn is None
        if not self.used_reference:
            try:
                _, weights = self.attention_fn(q, k, v)
                weights = np.asarray(weights.detach().cpu() if torch.is_tensor(weights) else weights, dtype=float)
                weights = weights.reshape(weights.shape[-2:]) if weights.size == len(tokens) ** 2 else weights
                if weights.shape != (len(tokens), len(tokens)):
                    return self._fail(f"Your function returned weights of shape {weights.shape}; expected "
                                      f"(1, L, L) = (1, {len(tokens)}, {len(tokens)}) for this sentence.")
            except NotImplementedError:
                self.used_reference = True
                note = ("Your scaled_dot_product_attention is not finished yet (NotImplementedError), so this "
                        "shows PyTorch's torch.nn.functional.scaled_dot_product_attention instead. ")
            except Exception as error:  # the explorer must never show a traceback
                self.weights = None
                self.message.value = explain_failure(error)
                self.plot.clear_output()
                return
        if self.used_reference:
            weights = reference_attention(q, k, v)[1][0].numpy().astype(float)
            if self.attention_fn is None:
                note = "Using PyTorch's scaled_dot_product_attention. "
        self.weights = weights
        i = self.query.value if self.query.value is not None else 0
        order = np.argsort(-weights[i])[:3]
        top = ", ".join(f"{tokens[j]!r} ({weights[i, j]:.2f})" for j in order)
        self._draw(tokens, weights, i)  # the figure first, then the caption that describes it
        self.message.value = message_html(
            f"{note}Query {tokens[i]!r} (position {i}), temperature {tau:.1f}: most weight on {top}. "
            "The embeddings are constructed by hand, not learned.", "todo" if note and self.attention_fn else "info")

    def _draw(self, tokens, weights, i):
        fig, (ax_bar, ax_map) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.1, 1]})
        colours = ["#d95f02" if j == np.argmax(weights[i]) else "#7570b3" for j in range(len(tokens))]
        ax_bar.bar(range(len(tokens)), weights[i], color=colours)
        ax_bar.set_xticks(range(len(tokens)), [f"{tok}" for tok in tokens], rotation=60)
        ax_bar.set(ylim=(0, 1), ylabel="attention weight", title=f"where {tokens[i]!r} (position {i}) looks")
        ax_bar.grid(axis="y", alpha=0.3)
        plot_attention(weights, tokens, tokens, ax=ax_map, title="all queries (rows) and keys (columns)",
                       xlabel="key", ylabel="query")
        ax_map.add_patch(plt.Rectangle((-0.5, i - 0.5), len(tokens), 1, fill=False, edgecolor="red", lw=2))
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def attention_explorer(attention_fn=None, sentence=EXAMPLES[0]):
    """Build and return an AttentionExplorer; display it by leaving it last in a cell."""
    return AttentionExplorer(attention_fn, sentence)
