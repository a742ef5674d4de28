"""Plots used across the course: training curves, accuracy by length, attention maps.

matplotlib is imported at the first plot, not with course_utils: a kernel that only checks answers (a grading
test's, a lent function's) does not pay for pyplot (0.4 CPU-s).
"""
import functools
import warnings

import numpy as np


def plot_curves(curves, title="training loss", xlabel="step", ylabel="loss", smooth=20, ax=None):
    """Plot one or more curves: curves is {name: list of values} (or one list).

    smooth: width of a moving average that makes noisy losses readable.
    """
    if not isinstance(curves, dict):
        curves = {"": curves}
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) == 0:
            raise ValueError(f"curves[{name!r}]: expected a non-empty list of numbers, got shape {values.shape}")
        if smooth and len(values) > smooth:
            values = np.convolve(values, np.ones(smooth) / smooth, mode="valid")
        ax.plot(values, label=name or None)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if any(curves):
        ax.legend()
    ax.grid(alpha=0.3)
    return ax


def plot_accuracy_by_length(accuracy_by_length, title="exact match against input length", ax=None):
    """Plot {model name: {length: accuracy}} as one line per model."""
    if not accuracy_by_length:
        raise ValueError("accuracy_by_length: expected at least one model, got an empty dict")
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, by_length in accuracy_by_length.items():
        lengths = sorted(by_length)
        ax.plot(lengths, [100 * by_length[n] for n in lengths], marker="o", label=name)
    ax.set(title=title, xlabel="source length (tokens)", ylabel="exact match (%)", ylim=(-3, 103))
    ax.legend()
    ax.grid(alpha=0.3)
    return ax


@functools.lru_cache(maxsize=None)
def _font_charmap(path):
    from matplotlib.ft2font import FT2Font
    try:
        return frozenset(FT2Font(path).get_charmap())
    except Exception:  # an unreadable font file simply covers nothing
        return frozenset()


def font_for(labels):
    """Find an installed font that can draw every character of `labels`.

    Returns a font family name, or None when no installed font covers them.
    """
    from matplotlib import font_manager
    needed = {ord(ch) for label in labels for ch in str(label) if not ch.isspace()}
    default = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))
    for path in [default] + sorted(font_manager.findSystemFonts()):
        if needed <= _font_charmap(path):
            return font_manager.FontProperties(fname=path).get_name()
    return None


def _drawable_labels(labels):
    """Labels plus a font that draws them; unprintable ones fall back to code points, with a warning."""
    labels = [str(t) for t in labels]
    family = font_for(labels)
    if family is not None:
        return labels, family
    warnings.warn("No installed font can draw some token labels; showing their Unicode code points "
                  "instead. Install a font for that script (for instance Debian's fonts-noto) to see them.",
                  stacklevel=3)
    fallback = [label if font_for([label]) else " ".join(f"U+{ord(c):04X}" for c in label) for label in labels]
    return fallback, None


def plot_attention(weights, source_tokens, target_tokens, ax=None, title="attention weights",
                   xlabel="source (keys)", ylabel="target (queries)", colorbar=True):
    """Heatmap of a (L_target, L_source) weight matrix with token labels on both axes."""
    import matplotlib.pyplot as plt
    weights = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (target, source) matrix, got shape {weights.shape}")
    if weights.shape != (len(target_tokens), len(source_tokens)):
        raise ValueError(f"weights: expected shape (len(target_tokens), len(source_tokens)) = "
                         f"({len(target_tokens)}, {len(source_tokens)}), got {weights.shape}")
    if ax is None:
        size = (max(3.0, 0.35 * weights.shape[1] + 1.5), max(2.5, 0.35 * weights.shape[0] + 1))
        _, ax = plt.subplots(figsize=size)
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(1e-9, float(np.nanmax(weights))), aspect="auto")
    src_labels, src_font = _drawable_labels(source_tokens)
    tgt_labels, tgt_font = _drawable_labels(target_tokens)
    ax.set_xticks(range(len(src_labels)), src_labels, rotation=90 if max(map(len, src_labels), default=0) > 2 else 0,
                  fontfamily=src_font)
    ax.set_yticks(range(len(tgt_labels)), tgt_labels, fontfamily=tgt_font)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if colorbar:
        plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax
