"""Lesson 2's explorer (reused by later lessons): step through greedy decoding
and see, at each step, the attention weights over the source tokens next to the
token the model produced.

The explorer only needs one function from the notebook:

    decode_with_attention(src, src_lengths, max_len) -> (ids, weights)
        src: (1, Lx) int64 source ids, src_lengths: (1,) int64
        ids: (1, T) int64 greedy output ids (it may stop early at <eos>)
        weights: (1, T, Lx) float, row t = the attention weights used to produce ids[0, t]

Greedy decoding is deterministic, so the explorer decodes once and then shows
the steps one by one.
"""
import html

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from ..data import EOS
from ..plotting import plot_attention
from .common import Explorer, explain_failure, labelled_row, message_html, show_figure, token_spans


def _weight_chips(tokens, weights):
    """Source tokens as chips whose background darkens with their weight (0..1)."""
    chips = []
    for tok, w in zip(tokens, weights):
        w = float(np.clip(w, 0.0, 1.0))
        colour = "white" if w > 0.55 else "black"
        chips.append(f'<span title="{w:.3f}" style="background:rgba(31,119,180,{w:.3f});color:{colour};'
                     f'padding:1px 4px;margin:1px;border:1px solid #ccc;border-radius:3px;'
                     f'font-family:monospace">{html.escape(str(tok))}</span>')
    return "".join(chips)


class AlignmentExplorer(Explorer):
    """Pick a held-out example or type a source, then step through decoding.

    Widgets (attributes, so a test can drive them): example_dropdown, source_text,
    decode_button, step_slider, prev_button, next_button, message (HTML),
    tokens (HTML: source chips shaded by weight, output so far, expected output),
    plot (Output: the weights at this step and the whole alignment map).
    Methods: select_example(i), decode_text(text), set_step(t), render_figure().
    State after a successful decode: source_tokens, output_tokens, expected_tokens,
    weights (numpy, (T, Lx)); after a failure: weights is None and message says why.
    """

    def __init__(self, task, decode_with_attention, device="cpu", lengths=(6, 10, 15), per_length=2,
                 max_source_len=None):
        if not callable(decode_with_attention):
            raise TypeError("decode_with_attention: expected a function (src, src_lengths, max_len) -> "
                            f"(ids, weights), got {type(decode_with_attention).__name__}")
        self.task, self.decode_fn, self.device = task, decode_with_attention, device
        self.max_source_len = min(max_source_len or task.max_len, task.max_len)
        self.examples = []  # (label, source id list)
        for length in lengths:
            if task.min_len <= length <= self.max_source_len:
                batch = task.held_out(length, n=per_length)
                for i in range(per_length):
                    ids = batch.src[i, : int(batch.src_lengths[i])].tolist()
                    self.examples.append((f"held-out, length {length}, #{i + 1}", ids))
        self.source_tokens, self.output_tokens, self.expected_tokens, self.weights = [], [], [], None

        self.example_dropdown = widgets.Dropdown(options=[(label, i) for i, (label, _) in enumerate(self.examples)],
                                                 description="example")
        self.source_text = widgets.Text(value="", placeholder="or type a source, e.g. a b c d e f",
                                        description="source")
        self.decode_button = widgets.Button(description="decode typed source", layout=widgets.Layout(width="auto"))
        self.step_slider = widgets.IntSlider(value=1, min=1, max=1, description="step")
        self.prev_button = widgets.Button(description="◀ previous")
        self.next_button = widgets.Button(description="next ▶")
        self.message = widgets.HTML(value="")
        self.tokens = widgets.HTML(value="")
        self.plot = widgets.Output()

        self.example_dropdown.observe(lambda change: self.select_example(change["new"]), names="value")
        self.decode_button.on_click(lambda _b: self.decode_text(self.source_text.value))
        self.step_slider.observe(lambda change: self._show_step(), names="value")
        self.prev_button.on_click(lambda _b: self.set_step(self.step_slider.value - 1))
        self.next_button.on_click(lambda _b: self.set_step(self.step_slider.value + 1))
        self.widget = widgets.VBox([
            self.example_dropdown,
            widgets.HBox([self.source_text, self.decode_button]),
            widgets.HBox([self.prev_button, self.step_slider, self.next_button]),
            self.message, self.tokens, self.plot])
        if self.examples:
            self.select_example(0)

    # ----- choosing the source -------------------------------------------------
    def select_example(self, index):
        """Decode the held-out example number `index` of the dropdown."""
        if not 0 <= index < len(self.examples):
            return self._fail(message_html(f"example: expected 0 to {len(self.examples) - 1}, got {index}", "error"))
        if self.example_dropdown.value != index:
            self.example_dropdown.value = index  # calls select_example again through observe
            return None
        return self._decode_ids(self.examples[index][1])

    def decode_text(self, text):
        """Decode a typed source such as "a b c d e" (tokens separated by spaces)."""
        tokens = str(text).split()
        vocab = self.task.vocab
        symbols = vocab.tokens[vocab.first_symbol_id:]
        if not tokens:
            return self._fail(message_html(
                f"The source is empty. Type {self.task.min_len} to {self.max_source_len} symbols separated by "
                f"spaces, for example: {' '.join(symbols[:6])}", "error"))
        unknown = sorted({t for t in tokens if t not in symbols})
        if unknown:
            return self._fail(message_html(
                f"Not in the vocabulary: {' '.join(unknown)}. The source may only use these symbols, separated "
                f"by spaces: {' '.join(symbols)}", "error"))
        if len(tokens) > self.max_source_len:
            return self._fail(message_html(
                f"The source is too long: {len(tokens)} tokens, and this model was trained on at most "
                f"{self.max_source_len}. Remove {len(tokens) - self.max_source_len} token(s).", "error"))
        if len(tokens) < self.task.min_len:
            return self._fail(message_html(
                f"The source is too short: {len(tokens)} token(s); this task uses {self.task.min_len} to "
                f"{self.max_source_len}.", "error"))
        return self._decode_ids(vocab.encode(tokens))

    # ----- decoding ------------------------------------------------------------
    def _fail(self, message):
        self.weights = None
        self.source_tokens, self.output_tokens, self.expected_tokens = [], [], []
        self.message.value = message
        self.tokens.value = ""
        self.plot.clear_output()
        return False

    def _decode_ids(self, source_ids):
        vocab = self.task.vocab
        batch = self.task.make_batch([list(source_ids)])
        lx = len(source_ids)
        try:
            with torch.no_grad():
                result = self.decode_fn(batch.src.to(self.device), batch.src_lengths.to(self.device), lx + 2)
            ids, weights = result
        except Exception as error:  # the explorer must never show a traceback
            return self._fail(explain_failure(error))
        ids = torch.as_tensor(ids).detach().cpu()
        weights = torch.as_tensor(weights).detach().float().cpu()
        if ids.dim() != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
            return self._fail(message_html(f"decode_with_attention returned ids of shape {tuple(ids.shape)}; "
                                           "expected (1, T) with T >= 1.", "error"))
        if weights.dim() != 3 or tuple(weights.shape) != (1, ids.shape[1], lx):
            return self._fail(message_html(
                f"decode_with_attention returned weights of shape {tuple(weights.shape)}; expected "
                f"(1, T, Lx) = (1, {ids.shape[1]}, {lx}): one row of weights over the source per output token.",
                "error"))
        ids = ids[0].tolist()
        steps = ids.index(EOS) + 1 if EOS in ids else len(ids)
        self.source_tokens = vocab.decode(source_ids)
        self.expected_tokens = vocab.decode(self.task.target_for(list(source_ids)))
        self.output_tokens = [vocab.tokens[i] for i in ids[:steps]]
        self.weights = weights[0, :steps].numpy()
        if not np.isfinite(self.weights).all():
            return self._fail(message_html("The attention weights contain NaN or infinity: check the softmax "
                                           "and the mask.", "error"))
        produced = vocab.decode(ids[:steps])
        verdict = "exact match" if produced == self.expected_tokens else "not an exact match"
        self.message.value = message_html(
            f"Source of {lx} tokens decoded in {steps} steps ({verdict}). Move the step slider to follow "
            "the attention.", "info" if produced == self.expected_tokens else "error")
        self.step_slider.max = max(1, steps)  # max first, so that value stays within range
        if self.step_slider.value != 1:
            self.step_slider.value = 1  # calls _show_step through observe
        else:
            self._show_step()
        return True

    # ----- showing one step ----------------------------------------------------
    def set_step(self, step):
        """Show decoding step `step` (1-based), clipped to the steps there are."""
        if self.weights is None:
            return
        self.step_slider.value = int(min(max(step, 1), len(self.output_tokens)))

    def render_figure(self):
        """The figure for the current step: the weights over the source, and the whole map."""
        if self.weights is None:
            return None
        t = self.step_slider.value - 1
        steps, lx = self.weights.shape
        fig, (bar_ax, map_ax) = plt.subplots(1, 2, figsize=(min(14, 4 + 0.5 * lx), 3.2 + 0.12 * steps),
                                             gridspec_kw={"width_ratios": [1, 1]})
        bar_ax.bar(range(lx), self.weights[t], color="tab:blue")
        bar_ax.set_xticks(range(lx), self.source_tokens)
        bar_ax.set(ylim=(0, 1.05), xlabel="source token (key)", ylabel="attention weight",
                   title=f"step {t + 1}: produced {self.output_tokens[t]!r}")
        plot_attention(self.weights, self.source_tokens, self.output_tokens, ax=map_ax,
                       title="all steps (current one boxed)", xlabel="source (keys)",
                       ylabel="output token (queries)", colorbar=False)
        map_ax.add_patch(plt.Rectangle((-0.5, t - 0.5), lx, 1, fill=False, edgecolor="red", linewidth=2))
        fig.tight_layout()
        return fig

    def _show_step(self):
        if self.weights is None:
            return
        t = self.step_slider.value - 1
        produced = self.output_tokens[:t + 1]
        correct = [j < len(self.expected_tokens) and tok == self.expected_tokens[j] for j, tok in enumerate(produced)]
        if produced[-1] == "<eos>":
            correct[-1] = len(produced) - 1 == len(self.expected_tokens)
        self.tokens.value = (labelled_row("source", _weight_chips(self.source_tokens, self.weights[t]))
                             + labelled_row("output so far", token_spans(produced, correct))
                             + labelled_row("expected", token_spans(self.expected_tokens + ["<eos>"])))
        show_figure(self.plot, self.render_figure())


def alignment_explorer(task, decode_with_attention, device="cpu", **kwargs):
    """Build and return an AlignmentExplorer; display it by leaving it last in a cell."""
    return AlignmentExplorer(task, decode_with_attention, device, **kwargs)
