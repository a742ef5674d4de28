"""Lesson 1's explorer: pick a source length, see the source, the target and the model's output."""
import ipywidgets as widgets
import torch

from .common import Explorer, explain_failure, labelled_row, message_html, token_spans


class DecodingExplorer(Explorer):
    """A length slider and a "new example" button over a trained seq2seq model.

    decode_fn(src, src_lengths, max_len) -> (1, T) predicted ids (the notebook's
    greedy decoder). Wrong output tokens are highlighted in red.
    Attributes for driving it from code: length_slider, next_button, display (HTML),
    and show(length, example) which renders one example.
    """

    def __init__(self, task, decode_fn, device="cpu"):
        self.task, self.decode_fn, self.device = task, decode_fn, device
        self.example = 0
        self.length_slider = widgets.IntSlider(value=min(10, task.max_len), min=task.min_len,
                                               max=task.max_len, description="length")
        self.next_button = widgets.Button(description="new example")
        self.display = widgets.HTML()
        self.length_slider.observe(lambda change: self.show(), names="value")
        self.next_button.on_click(self._next)
        self.widget = widgets.VBox([widgets.HBox([self.length_slider, self.next_button]), self.display])
        self.show()

    def _next(self, _button=None):
        self.example += 1
        self.show()

    def show(self, length=None, example=None):
        if length is not None:
            self.length_slider.value = length  # triggers show() through observe
            return
        if example is not None:
            self.example = example
        length = self.length_slider.value
        held_out = self.task.held_out(length, n=50)
        i = self.example % len(held_out)
        vocab = self.task.vocab
        source = vocab.decode(held_out.src[i])
        target = vocab.decode(held_out.tgt_out[i])
        try:
            with torch.no_grad():
                predicted_ids = self.decode_fn(held_out.src[i:i + 1].to(self.device),
                                               held_out.src_lengths[i:i + 1].to(self.device), length + 2)
            output = vocab.decode(predicted_ids[0].cpu())
        except Exception as error:  # the explorer must never show a traceback
            self.display.value = explain_failure(error)
            return
        correct = [j < len(target) and tok == target[j] for j, tok in enumerate(output)]
        missing = max(0, len(target) - len(output))
        verdict = ("exact match" if output == target else
                   f"{sum(not c for c in correct) + missing} token(s) wrong or missing")
        self.display.value = (labelled_row("source", token_spans(source))
                              + labelled_row("target", token_spans(target))
                              + labelled_row("model output", token_spans(output, correct))
                              + message_html(f"length {length}, held-out example {i}: {verdict}",
                                             "info" if output == target else "error"))


def decoding_explorer(task, decode_fn, device="cpu"):
    """Build and return a DecodingExplorer; display it by leaving it last in a cell."""
    return DecodingExplorer(task, decode_fn, device)
