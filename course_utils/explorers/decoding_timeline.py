"""Lesson 8's explorer: a decoding timeline with a KV cache and an online softmax.

It decodes a short random sequence one token per step with the student's
KVCache and cached_self_attention, then replays the newest query's softmax
tile by tile with the student's online_softmax_update. Three panels: the
weights of every query so far against the cached keys (the cache grows one
column per step), the newest query's scores split into key tiles with the
running max, and the weights the running statistics give so far against the
final softmax. If an exercise it needs is unfinished, it says which one.
"""
import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from .common import Explorer, explain_failure, message_html, show_figure

TILE_SIZES = (1, 2, 3, 4, 6, 8)


def _student_failure(error, what):
    if isinstance(error, NotImplementedError):
        return message_html(f"{what} is not finished yet (NotImplementedError): complete that exercise, "
                            "re-run its cell, then this one.", "todo")
    return explain_failure(error)


def fold_tiles(update_fn, scores, tile_size, tiles):
    """Run update_fn(m, s, block) over the first `tiles` tiles of a 1-D row of scores.

    Returns (m, s) as floats after the last folded tile.
    """
    m, s = torch.tensor([float("-inf")], dtype=scores.dtype), torch.tensor([0.0], dtype=scores.dtype)
    for n, start in enumerate(range(0, len(scores), tile_size)):
        if n == tiles:
            break
        m, s = update_fn(m, s, scores[None, start:start + tile_size])
    return float(torch.as_tensor(m).reshape(-1)[0]), float(torch.as_tensor(s).reshape(-1)[0])


class DecodingTimeline(Explorer):
    """Step through cached decoding and the online softmax of the newest query.

    layer_cls(d_model, n_heads): the lesson's CausalSelfAttention (project, merge, forward, head_dim)
    cache_cls(): a KVCache with update(k_new, v_new) -> (k, v) and attributes k, v
    attention_fn(layer, x_new, cache) -> (output (B, T, d_model), weights (B, H, T, L))
    update_fn(m, s, block) -> (m_new, s_new), the online softmax update
    Attributes for driving it from code: step, tiles (IntSlider), head, tile_size (Dropdown),
    message (HTML), plot (Output); after decoding: weights (list of (H, t+1) arrays per step) or
    None, cache_lengths (list), gap (float, cached against full recomputation); after each
    render: running (m, s) or None, figure (closed matplotlib figure) or None.
    """

    def __init__(self, layer_cls, cache_cls, attention_fn, update_fn, length=12, d_model=16, n_heads=2, seed=0):
        self.layer_cls, self.cache_cls = layer_cls, cache_cls
        self.attention_fn, self.update_fn = attention_fn, update_fn
        self.length, self.n_heads = length, n_heads
        self.weights, self.cache_lengths, self.keys, self.queries, self.gap = None, None, None, None, None
        self.running, self.figure, self.decode_error = None, None, None
        self._updating = False
        gen = torch.Generator().manual_seed(seed)
        self.layer = layer_cls(d_model, n_heads)
        with torch.no_grad():
            for p in self.layer.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * (1.2 / math.sqrt(p.shape[-1])))
        self.x = torch.randn(1, length, d_model, generator=gen)
        self.step = widgets.IntSlider(value=length // 2, min=0, max=length - 1, description="step",
                                      continuous_update=False)
        self.head = widgets.Dropdown(options=[(f"head {h}", h) for h in range(n_heads)], value=0, description="head")
        self.tile_size = widgets.Dropdown(options=list(TILE_SIZES), value=3, description="tile size")
        self.tiles = widgets.IntSlider(value=1, min=1, max=1, description="tiles folded", continuous_update=False,
                                       style={"description_width": "initial"})
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        self.step.observe(lambda change: self._new_step(), names="value")
        self.tile_size.observe(lambda change: self._new_step(), names="value")
        for w in (self.head, self.tiles):
            w.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([widgets.HBox([self.step, self.head]), widgets.HBox([self.tile_size, self.tiles]),
                                    self.message, self.plot])
        self._decode()
        self._new_step()

    # ------------------------------------------------------------ decoding with the student's code
    def _decode(self):
        try:
            cache = self.cache_cls()
            weights, lengths, keys, queries, outputs = [], [], [], [], []
            with torch.no_grad():
                full = self.layer(self.x)
                for t in range(self.length):
                    x_t = self.x[:, t:t + 1]
                    out, w = self.attention_fn(self.layer, x_t, cache)
                    w = torch.as_tensor(w).detach().float()
                    if tuple(w.shape) != (1, self.n_heads, 1, t + 1):
                        raise ValueError(f"cached_self_attention returned weights of shape {tuple(w.shape)} at step "
                                         f"{t}; expected (B, H, T, L) = (1, {self.n_heads}, 1, {t + 1}).")
                    weights.append(w[0, :, 0].numpy())
                    lengths.append(len(cache))
                    k = torch.as_tensor(cache.k).detach()
                    keys.append(k[0].clone())
                    queries.append(self.layer.project(x_t)[0][0, :, 0].clone())
                    outputs.append(torch.as_tensor(out).detach())
            self.gap = (torch.cat(outputs, dim=1) - full).abs().max().item()
            self.weights, self.cache_lengths, self.keys, self.queries = weights, lengths, keys, queries
            self.decode_error = None
        except Exception as error:  # never a traceback inside the widget
            self.weights = None
            self.decode_error = _student_failure(error, "KVCache or cached_self_attention (Exercises 1-3)")

    def _new_step(self):
        count = math.ceil((self.step.value + 1) / self.tile_size.value)
        self._updating = True
        try:
            self.tiles.max = count
            self.tiles.value = min(self.tiles.value, count)
        finally:
            self._updating = False
        self.render()

    # ------------------------------------------------------------ drawing
    def render(self):
        """Redraw for the current controls; never raises."""
        if self._updating:
            return
        if self.weights is None:
            self.running, self.figure = None, None
            self.message.value = self.decode_error
            self.plot.clear_output()
            return
        t, h, size, tiles = self.step.value, self.head.value, self.tile_size.value, self.tiles.value
        scores = (self.keys[t][h] @ self.queries[t][h] / math.sqrt(self.queries[t].shape[-1])).double()
        failure = None
        try:
            self.running = fold_tiles(self.update_fn, scores, size, tiles)
        except Exception as error:
            self.running, failure = None, _student_failure(error, "online_softmax_update (Exercise 4)")
        self._draw(t, h, size, tiles, scores.numpy())
        self._describe(t, h, size, tiles, scores, failure)

    def _describe(self, t, h, size, tiles, scores, failure):
        head_dim = self.keys[t].shape[-1]
        first, last = (tiles - 1) * size, min(tiles * size, t + 1) - 1
        notes = [f"Step {t}: the new token (position {t}) reads keys 0..{t}. The cache holds "
                 f"{self.cache_lengths[t]} tokens: k and v are (1, {self.n_heads}, {self.cache_lengths[t]}, {head_dim}) "
                 f"each, {2 * self.n_heads * self.cache_lengths[t] * head_dim} numbers for this layer."]
        kind = "info"
        if self.cache_lengths[t] != t + 1:
            notes.append(f"len(cache) should be {t + 1} after {t + 1} tokens, got {self.cache_lengths[t]}.")
            kind = "error"
        if self.gap > 1e-4:
            notes.append(f"Cached decoding differs from recomputing the whole sequence by up to {self.gap:.2g}: "
                         "check the cache order, the mask and the scale.")
            kind = "error"
        else:
            notes.append(f"Cached decoding equals recomputing everything (max gap {self.gap:.1e}).")
        if failure:
            self.message.value = message_html(" ".join(notes), kind) + failure
            return
        m, s = self.running
        notes.append(f"Tile {tiles} of {math.ceil((t + 1) / size)} folded (keys {first}..{last}): running max "
                     f"{m:.3f}, running sum {s:.3f}.")
        if tiles * size >= t + 1:
            final = torch.softmax(scores, -1).numpy()
            streamed = np.exp(scores.numpy() - m) / s
            gap = float(np.abs(streamed - final).max())
            notes.append(f"Every tile is folded: the streamed weights equal the softmax (max gap {gap:.1e})." if gap < 1e-6
                         else f"Every tile is folded, but the streamed weights differ from the softmax by {gap:.2g}: "
                              "rescale the running sum when the max changes.")
            kind = "error" if gap >= 1e-6 else kind
        self.message.value = message_html(" ".join(notes), kind)

    def _draw(self, t, h, size, tiles, scores):
        n = self.length
        grid = np.full((n, n), np.nan)
        for r in range(t + 1):
            grid[r, :r + 1] = self.weights[r][h]
        fig, (ax_cache, ax_scores, ax_weights) = plt.subplots(1, 3, figsize=(14, 4.2),
                                                              gridspec_kw={"width_ratios": [1, 1.25, 1.25]})
        cmap = plt.get_cmap("viridis").with_extremes(bad="#f4f4f4")
        ax_cache.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1)
        ax_cache.add_patch(Rectangle((-0.5, t - 0.5), t + 1, 1, fill=False, ec="#d62728", lw=2))
        ax_cache.axvline(t + 0.5, color="#d62728", ls=":", lw=1)
        ax_cache.set(title=f"step {t}: the cache holds {t + 1} keys\nweights of each query, head {h}", xlabel="cached key (position)",
                     ylabel="query (step)", xticks=range(0, n, 2), yticks=range(0, n, 2))

        keys = np.arange(t + 1)
        colours = ["#c8c8c8"] * (t + 1)
        folded = min(tiles * size, t + 1)
        for j in range(folded):
            colours[j] = "#1f77b4" if (j // size) % 2 == 0 else "#6baed6"
        ax_scores.bar(keys, scores, color=colours)
        for start in range(size, t + 1, size):
            ax_scores.axvline(start - 0.5, color="#888", ls=":", lw=1)
        first = (tiles - 1) * size
        low, high = min(0.0, scores.min()), max(0.0, scores.max())
        ax_scores.add_patch(Rectangle((first - 0.5, low), folded - first, high - low, fill=False, ec="#d62728", lw=2))
        if self.running is not None:
            ax_scores.axhline(self.running[0], color="#d62728", ls="--", lw=1.2, label="running max")
            ax_scores.legend(loc="lower right", fontsize=8)
        ax_scores.set(title=f"newest query's scores, tiles of {size}\n(coloured = folded, framed = last folded)", xlabel="key",
                      ylabel="score", xlim=(-0.7, n - 0.3))

        final = np.exp(scores - scores.max())
        final /= final.sum()
        ax_weights.bar(keys, final, color="none", ec="black", lw=1, label="final softmax")
        top = final.max()
        if self.running is not None:
            m, s = self.running
            partial = np.where(keys < folded, np.exp(scores - m) / s if s > 0 else 0.0, 0.0)
            top = max(top, float(np.nan_to_num(partial).max()))
            ax_weights.bar(keys, partial, color="#1f77b4", alpha=0.7, label="exp(x - m) / s so far")
            ax_weights.set_title(f"weights from running max and sum\n(m = {m:.2f}, s = {s:.2f})")
        else:
            ax_weights.text(0.5, 0.5, "online_softmax_update\nis not finished", ha="center", va="center",
                            transform=ax_weights.transAxes, color="#7a5a00")
            ax_weights.set_title("weights from running max and sum")
        ax_weights.set(xlabel="key", ylabel="weight", xlim=(-0.7, n - 0.3), ylim=(0, min(1.05, 1.3 * top + 1e-3)))
        ax_weights.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def decoding_timeline(layer_cls, cache_cls, attention_fn, update_fn, length=12):
    """Build and return a DecodingTimeline; display it by leaving it last in a cell."""
    return DecodingTimeline(layer_cls, cache_cls, attention_fn, update_fn, length=length)
