"""The class report's two figures: the scores' distribution and each exercise's pass rate (PNG, base64)."""
import base64
import io


def _png(fig):
    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def class_figures(submissions, items):
    """(score distribution PNG, pass rate PNG), base64: submissions are class_report.Submission, items its _items."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    graded = [s for s in submissions if s.status == "graded" and s.max_score]
    fig, ax = plt.subplots(figsize=(6, 2.8))
    top = max((s.max_score for s in graded), default=1)
    scores = [s.score for s in graded]
    whole = top <= 40 and all(float(x).is_integer() for x in scores + [top])  # one bar per score, centred on it
    ax.hist(scores, bins=[x - 0.5 for x in range(int(top) + 2)] if whole else min(20, max(5, int(top) + 1)),
            range=None if whole else (0, top), color="#3465a4", edgecolor="white")
    if whole:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set(xlabel=f"score (of {top:g})", ylabel="submissions", title=f"scores of {len(graded)} graded submissions")
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))  # counts of submissions
    scores = _png(fig)
    ordered = sorted((i for i in items if i["rate"] is not None), key=lambda i: i["rate"])
    fig, ax = plt.subplots(figsize=(6, 0.45 * max(3, len(ordered)) + 0.8))
    ax.barh([i["name"] for i in ordered][::-1], [100 * i["rate"] for i in ordered][::-1], color="#4e9a06")
    for y, i in enumerate(ordered[::-1]):
        ax.text(min(100 * i["rate"] + 1, 92), y, f"{100 * i['rate']:.0f}%", va="center", fontsize=8)
    ax.set(xlim=(0, 100), xlabel="% of graded submissions with full marks", title="each exercise, hardest first")
    return scores, _png(fig)
