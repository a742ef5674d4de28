"""Lesson 10's explorer: which queries a fixed state answers, and which keys it confuses.

It draws one fresh MQAR example (course_utils.mqar) and runs a trained recall model of the lesson on
it. For "linear" models the state is built with the student's linear_attention_step, one pair at a
time, and read with each query; other models use their own memory. The picture: how much each query
reads each stored pair (its own key framed), and beside it, per query, right (green) or wrong (red);
the text names, for each wrong answer, the stored key whose value came back instead.
If the student's step is unfinished or wrong, it says so instead of a traceback.
"""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from ..mqar import recall_batch
from .common import Explorer, explain_failure, message_html, show_figure


def _student_failure(error):
    if isinstance(error, NotImplementedError):
        return message_html("linear_attention_step (Exercise 2) is not finished yet (NotImplementedError): "
                            "complete it and re-run its cell and this one to see the linear models.", "todo")
    return explain_failure(error)


def memory_label(name, model, n_pairs):
    if model.kind == "softmax":
        return f"{name} (keeps every pair: {model.memory_bytes(n_pairs)} B at {n_pairs} pairs)"
    return f"{name} (state {model.memory_bytes(0)} B)"


class RecallExplorer(Explorer):
    """Pick a trained memory, a number of pairs and an example; see right and confused queries.

    models: {name: RecallModel} (attributes kind, d_k; methods features, state, read, memory_bytes; readout)
    step_fn(S, z, q_t, k_t, v_t) -> (o_t, S_new, z_new): the student's linear_attention_step
    phi: the feature map (elu_plus_one)
    Attributes for driving it from code: memory (Dropdown), pairs, example (IntSlider), message (HTML),
    plot (Output); after each render: result (dict: weights (Q, N), right (Q,) bools, confused (list of
    key ids or None), state_gap (float or None)) or None, figure (closed matplotlib figure) or None.
    """

    def __init__(self, models, step_fn, phi, pair_counts=(4, 8, 16, 32, 64), start_pairs=8):
        if not models:
            raise ValueError("models: expected at least one trained recall model")
        self.models, self.step_fn, self.phi = dict(models), step_fn, phi
        self.result, self.figure = None, None
        max_pairs = max(pair_counts)
        first = next(iter(self.models.values()))
        self.n_keys, self.n_values = first.key_embed.num_embeddings, first.readout.out_features
        self.memory = widgets.Dropdown(options=[(memory_label(n, m, max_pairs), n) for n, m in self.models.items()],
                                       value=next((n for n, m in self.models.items() if m.kind == "linear"),
                                                  next(iter(self.models))),
                                       description="memory", layout=widgets.Layout(width="520px"))
        self.pairs = widgets.IntSlider(value=min(start_pairs, max_pairs), min=2, max=max_pairs, description="pairs",
                                       continuous_update=False)
        self.example = widgets.IntSlider(value=0, min=0, max=19, description="example", continuous_update=False)
        self.message = widgets.HTML()
        self.plot = widgets.Output()
        for w in (self.memory, self.pairs, self.example):
            w.observe(lambda change: self.render(), names="value")
        self.widget = widgets.VBox([self.memory, widgets.HBox([self.pairs, self.example]), self.message, self.plot])
        self.render()

    # ------------------------------------------------------------ the model on one example
    @torch.no_grad()
    def _run(self, model, batch):
        keys, values, queries = batch.keys, batch.values, batch.queries
        q, k, v, g = model.features(keys, values, queries)
        memory = model.state(keys, values)
        state_gap = None
        if model.kind == "linear":
            S = k.new_zeros(model.d_k, v.shape[-1])
            z = k.new_zeros(model.d_k)
            for j in range(k.shape[1]):
                _, S, z = self.step_fn(S, z, k[0, j], k[0, j], v[0, j])
            S, z = torch.as_tensor(S).detach().float(), torch.as_tensor(z).detach().float()
            if tuple(S.shape) != (model.d_k, v.shape[-1]) or tuple(z.shape) != (model.d_k,):
                raise ValueError(f"linear_attention_step returned a state of shapes {tuple(S.shape)} and "
                                 f"{tuple(z.shape)}; expected ({model.d_k}, {v.shape[-1]}) and ({model.d_k},).")
            state_gap = max((S - memory[0][0]).abs().max().item(), (z - memory[1][0]).abs().max().item())
            memory = (S[None], z[None])
        logits = model.readout(model.read(memory, q))
        predicted = logits.argmax(-1)[0]
        if model.kind == "softmax":
            weights = torch.softmax(q @ k.transpose(1, 2), -1)[0]
        elif model.kind == "delta":
            weights = torch.nn.functional.normalize(q, dim=-1)[0] @ torch.nn.functional.normalize(k, dim=-1)[0].T
        else:
            phi_k = self.phi(k)[0]
            if model.kind == "gated":
                log_a = torch.nn.functional.logsigmoid(g)[0]
                phi_k = phi_k * torch.exp(log_a.flip(0).cumsum(0).flip(0) - log_a)[:, None]
            raw = self.phi(q)[0] @ phi_k.T
            weights = raw / raw.sum(-1, keepdim=True)
        return weights.numpy(), predicted, state_gap

    def compute(self):
        name = self.memory.value
        model, n_pairs = self.models[name], self.pairs.value
        gen = torch.Generator().manual_seed(1000 + 97 * n_pairs + self.example.value)
        batch = recall_batch(1, n_pairs, self.n_keys, self.n_values, generator=gen)
        weights, predicted, state_gap = self._run(model, batch)
        keys, values = batch.keys[0].tolist(), batch.values[0].tolist()
        queries, answers = batch.queries[0].tolist(), batch.answers[0].tolist()
        right, confused = [], []
        for i, (query, answer) in enumerate(zip(queries, answers)):
            guess = int(predicted[i])
            right.append(guess == answer)
            candidates = [j for j, value in enumerate(values) if value == guess and keys[j] != query]
            confused.append(None if guess == answer or not candidates
                            else keys[max(candidates, key=lambda j: weights[i, j])])
        own = [keys.index(query) for query in queries]
        return {"name": name, "model": model, "keys": keys, "values": values, "queries": queries,
                "answers": answers, "predicted": [int(p) for p in predicted], "weights": weights,
                "right": np.array(right), "confused": confused, "own": own, "state_gap": state_gap}

    # ------------------------------------------------------------ drawing
    def render(self):
        """Recompute and redraw for the current controls; never raises."""
        try:
            self.result = self.compute()
        except Exception as error:  # never a traceback inside the widget
            self.result, self.figure = None, None
            self.message.value = _student_failure(error)
            self.plot.clear_output()
            return
        self._describe(self.result)
        self._draw(self.result)

    def _describe(self, r):
        model, n = r["model"], len(r["keys"])
        kind = "info"
        notes = [f"{memory_label(r['name'], model, n)}: {int(r['right'].sum())} of {n} queries answered right."]
        if r["state_gap"] is not None:
            if r["state_gap"] > 1e-3:
                notes.append(f"The state built with your linear_attention_step differs from the model's by up to "
                             f"{r['state_gap']:.2g}: check S_new = S + phi(k) v^T and z_new = z + phi(k).")
                kind = "error"
            else:
                notes.append(f"State built with your linear_attention_step, pair by pair (equal to the model's: max gap "
                             f"{r['state_gap']:.1e}).")
        wrong = [(i, c) for i, (ok, c) in enumerate(zip(r["right"], r["confused"])) if not ok]
        chips = []
        for i, query in enumerate(r["queries"]):
            colour = "#c8f7c5" if r["right"][i] else "#ffb3b3"
            text = f"k{query}&rarr;v{r['predicted'][i]}"
            if not r["right"][i]:
                text += f" (wanted v{r['answers'][i]}" + (f"; gave k{r['confused'][i]}'s value)" if r["confused"][i]
                                                           is not None else "; a value not in the context)")
            chips.append(f'<span style="background:{colour};padding:1px 4px;margin:1px;border-radius:3px;'
                         f'font-family:monospace;display:inline-block">{text}</span>')
        confused = sum(c is not None for _, c in wrong)
        if wrong:
            notes.append(f"Of the {len(wrong)} wrong answers, {confused} gave the value of another stored key "
                         "(the key it confused the query with).")
        self.message.value = (message_html(" ".join(notes), kind)
                              + f'<div style="margin-top:4px;line-height:1.7">{"".join(chips)}</div>')

    def _draw(self, r):
        n = len(r["keys"])
        order = np.argsort(r["own"])                      # rows in the order the pairs were stored
        weights = r["weights"][order]
        fig, (ax, ax_right) = plt.subplots(1, 2, figsize=(9.5, 4.6), gridspec_kw={"width_ratios": [12, 1]})
        label = {"softmax": "softmax weight", "delta": "cosine(query, key)"}.get(r["model"].kind, "read weight")
        image = ax.imshow(weights, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, fraction=0.04, label=label)
        for row, i in enumerate(order):
            ax.add_patch(Rectangle((r["own"][i] - 0.5, row - 0.5), 1, 1, fill=False, ec="white", lw=1.2))
            if r["confused"][i] is not None:
                ax.plot(r["keys"].index(r["confused"][i]), row, "x", color="#ff4040", ms=6, mew=2)
        ax.set(xlabel="stored pair (in the order written)", ylabel="query (sorted by its pair)",
               title=f"{r['name']}: how much each query reads each pair\n(frame: its own key; red x: the key it confused)")
        colours = np.array([[0.55, 0.85, 0.55] if ok else [0.95, 0.45, 0.45] for ok in r["right"][order]])
        ax_right.imshow(colours[:, None, :], aspect="auto")
        ax_right.set(xticks=[], yticks=[], title="right?")
        if n > 24:
            ax.set(xticks=range(0, n, max(1, n // 8)), yticks=range(0, n, max(1, n // 8)))
        fig.tight_layout()
        self.figure = fig
        show_figure(self.plot, fig)


def recall_explorer(models, step_fn, phi, pair_counts=(4, 8, 16, 32, 64)):
    """Build and return a RecallExplorer; display it by leaving it last in a cell."""
    return RecallExplorer(models, step_fn, phi, pair_counts=pair_counts)
