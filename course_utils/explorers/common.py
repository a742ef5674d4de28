"""Pieces shared by the explorers: safe callbacks and small HTML renderers.

Every explorer works on ipywidgets 7.7 (Colab) and 8.x, with the inline
matplotlib backend and no JavaScript of its own.
"""
import html



def message_html(text, kind="info"):
    """A coloured box for messages shown inside a widget instead of a traceback."""
    colours = {"info": ("#eef5ff", "#1d4f91"), "error": ("#fff0f0", "#a30000"), "todo": ("#fff8e1", "#7a5a00")}
    background, colour = colours[kind]
    return (f'<div style="background:{background};color:{colour};padding:6px 10px;'
            f'border-radius:4px;font-family:sans-serif">{html.escape(text)}</div>')


def explain_failure(error):
    """Turn an exception raised by a student's function into a short message."""
    if isinstance(error, NotImplementedError):
        return message_html("This explorer runs your code, and an exercise it needs is not finished yet "
                            "(NotImplementedError). Complete the exercises above, re-run their cells, "
                            "then this one.", "todo")
    return message_html(f"{type(error).__name__}: {error}", "error")


def token_spans(tokens, correct=None):
    """Render tokens as monospace chips; with `correct` (list of bools) wrong ones are red."""
    chips = []
    for i, tok in enumerate(tokens):
        if correct is None:
            style = "background:#eee"
        else:
            style = "background:#c8f7c5" if correct[i] else "background:#ffb3b3;font-weight:bold"
        chips.append(f'<span style="{style};padding:1px 4px;margin:1px;border-radius:3px;'
                     f'font-family:monospace">{html.escape(str(tok))}</span>')
    return "".join(chips) or '<span style="color:#888">(nothing)</span>'


def labelled_row(label, content_html):
    return (f'<div style="margin:3px 0"><span style="display:inline-block;width:110px;'
            f'font-family:sans-serif;color:#555">{html.escape(label)}</span>{content_html}</div>')


def show_figure(output, fig):
    """Show a matplotlib figure in an Output widget, replacing what it showed, then close it.

    Closing keeps the inline backend from drawing a second copy below the cell.
    Outside IPython (a test driving the widgets) nothing is displayed.
    """
    import matplotlib.pyplot as plt
    from IPython import get_ipython
    from IPython.display import display

    output.clear_output(wait=True)
    if get_ipython() is not None:
        with output:
            display(fig)
    plt.close(fig)


class Explorer:
    """Base of the explorers: the top-level widget lives in `self.widget`, and the
    explorer displays as that widget when it is the last value of a cell."""

    widget = None

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)
