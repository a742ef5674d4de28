"""Unit tests of the course_utils helpers."""
import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import course_utils as cu
from course_utils import BOS, EOS, PAD


@pytest.fixture
def task():
    return cu.ReversalTask(num_symbols=10, min_len=5, max_len=50, seed=3)


def test_same_seed_gives_same_batches():
    a, b = cu.ReversalTask(seed=7), cu.ReversalTask(seed=7)
    for _ in range(3):
        x, y = a.sample(16), b.sample(16)
        assert torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out)


def test_different_seeds_give_different_batches():
    assert not torch.equal(cu.ReversalTask(seed=1).sample(16, 10).src, cu.ReversalTask(seed=2).sample(16, 10).src)


def test_held_out_set_does_not_depend_on_training_draws(task):
    before = task.held_out(12, n=20)
    task.sample(64)
    assert torch.equal(before.src, task.held_out(12, n=20).src)


def test_seed_everything_repeats_torch_draws():
    cu.seed_everything(5)
    first = torch.randn(4)
    cu.seed_everything(5)
    assert torch.equal(first, torch.randn(4))


def test_targets_are_reversed_sources_framed_by_bos_and_eos(task):
    batch = task.sample(8, (5, 9))
    for i in range(8):
        n = int(batch.src_lengths[i])
        source = batch.src[i, :n].tolist()
        assert batch.tgt_in[i, : n + 1].tolist() == [BOS] + source[::-1]
        assert batch.tgt_out[i, : n + 1].tolist() == source[::-1] + [EOS]


def test_padding_fills_past_each_length(task):
    batch = task.sample(32, (5, 20))
    assert batch.src.shape[1] == int(batch.src_lengths.max())
    for row, n in zip(batch.src, batch.src_lengths.tolist()):
        assert (row[:n] >= task.vocab.first_symbol_id).all() and (row[n:] == PAD).all()
    assert ((batch.tgt_out != PAD).sum(1) == batch.src_lengths + 1).all()


def test_lengths_stay_in_the_requested_range(task):
    lengths = task.sample(200, (7, 11)).src_lengths
    assert lengths.min() >= 7 and lengths.max() <= 11 and len(set(lengths.tolist())) > 1


def test_same_length_batches_have_no_padding(task):
    batch = task.sample(20, (5, 50), same_length=True)
    assert len(set(batch.src_lengths.tolist())) == 1 and (batch.src != PAD).all()


def test_lengths_up_to_fifty_are_supported(task):
    assert task.held_out(50, n=3).src.shape == (3, 50)


def test_vocab_round_trip_and_decode_stops_at_eos(task):
    ids = task.vocab.encode(["a", "c", "b"])
    assert task.vocab.decode(ids + [EOS, 5, PAD]) == ["a", "c", "b"]


@pytest.mark.parametrize("call, argument", [
    (lambda t: t.sample(4, 60), "lengths"),
    (lambda t: t.sample(4, (5, 51)), "lengths[1]"),
    (lambda t: t.held_out(0), "length"),
    (lambda t: t.sample(0), "batch_size"),
    (lambda t: t.make_batch([]), "sources"),
    (lambda t: t.encode_source(""), "text"),
    (lambda t: t.encode_source("a zz"), "tokens"),
    (lambda t: cu.pad_sequences([]), "sequences"),
    (lambda t: cu.pad_sequences([torch.zeros(2, 2, dtype=torch.long)]), "sequences[0]"),
    (lambda t: cu.pad_sequences([torch.tensor([0.5, 1.0])]), "sequences[0]"),
    (lambda t: cu.exact_match(torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.long)), "predictions"),
    (lambda t: cu.exact_match(torch.zeros(3, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long)), "predictions"),
    (lambda t: cu.exact_match(torch.zeros(2, 4, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long)), "predictions, targets"),
    (lambda t: cu.ReversalTask(num_symbols=40), "num_symbols"),
    (lambda t: cu.seed_everything(1.5), "seed"),
    (lambda t: cu.plot_attention(np.ones((2, 3)), ["a", "b"], ["x", "y"]), "weights"),
])
def test_bad_input_names_the_argument(task, call, argument):
    with pytest.raises((ValueError, TypeError, KeyError)) as error:
        call(task)
    assert str(error.value).strip("'\"").startswith(argument + ":"), str(error.value)


def test_exact_match_ignores_padding_and_what_follows_eos():
    target = torch.tensor([[5, 6, EOS, PAD], [5, 6, EOS, PAD], [5, 6, EOS, PAD], [5, 6, EOS, PAD]])
    predicted = torch.tensor([[5, 6, EOS, 9], [5, 6, 7, EOS], [5, EOS, PAD, PAD], [5, 6, EOS, PAD]])
    assert cu.exact_match(predicted, target).tolist() == [True, False, False, True]


def test_evaluate_by_length_counts_exact_matches(task):
    def perfect(src, src_lengths, max_len):
        return torch.stack([torch.cat([s[:n].flip(0), torch.tensor([EOS])]) for s, n in zip(src, src_lengths)])

    def drops_first_half(src, src_lengths, max_len):
        out = perfect(src, src_lengths, max_len)
        return torch.where(torch.arange(len(src)).unsqueeze(1) % 2 == 0, out, torch.full_like(out, EOS))

    assert cu.evaluate_by_length(perfect, task, [5, 20, 50], n=10) == {5: 1.0, 20: 1.0, 50: 1.0}
    assert cu.evaluate_by_length(drops_first_half, task, [8], n=10) == {8: 0.5}


def test_training_loop_feeds_padded_targets_and_lowers_the_loss(task):
    seen_pad = []

    def loss_fn(logits, targets):
        seen_pad.append(bool((targets == PAD).any()))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD)

    class Memoriser(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(len(task.vocab), len(task.vocab))

        def forward(self, src, src_lengths, tgt_in):
            return self.table(tgt_in)

    cu.seed_everything(0)
    history = cu.train_seq2seq(Memoriser(), task, loss_fn, steps=60, lr=0.05, lengths=(5, 8),
                               same_length=False, progress=False)
    assert any(seen_pad), "mixed-length batches should reach the loss with padding"
    assert np.mean(history["loss"][-10:]) < np.mean(history["loss"][:10])


def test_training_rejects_a_model_with_wrongly_shaped_logits(task):
    class Wrong(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, src, src_lengths, tgt_in):
            return self.w * torch.zeros(src.shape[0], 3, 5)

    with pytest.raises(ValueError, match="model output"):
        cu.train_seq2seq(Wrong(), task, lambda lg, t: lg.sum(), steps=1, lengths=10, progress=False)


def test_fast_mode_follows_the_environment(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("COURSE_FAST", "0")
    assert cu.budget(100, 5) == 100
    monkeypatch.setenv("COURSE_FAST", "1")
    assert cu.budget(100, 5) == 5
    monkeypatch.delenv("COURSE_FAST")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert cu.is_fast_mode()


def test_pick_device_honours_a_choice_and_rejects_nonsense(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert cu.pick_device("cpu").type == "cpu"
    assert cu.pick_device().type in ("cpu", "cuda", "mps")
    with pytest.raises(ValueError, match="prefer"):
        cu.pick_device("tpu")


def test_attention_heatmap_labels_both_axes():
    matplotlib.use("Agg")
    ax = cu.plot_attention(np.full((2, 3), 1 / 3), ["a", "b", "c"], ["x", "y"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y"]
    assert ax.get_xlabel() and ax.get_ylabel()


def test_heatmap_falls_back_with_a_warning_when_no_font_has_the_script(monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.setattr(cu.plotting, "font_for", lambda labels: None)
    with pytest.warns(UserWarning, match="font"):
        ax = cu.plot_attention(np.ones((1, 2)) / 2, ["बत्ती", "a"], ["x"])
    assert [t.get_text() for t in ax.get_xticklabels()][0].startswith("U+092C")


def test_check_helpers_raise_assertion_errors_with_the_name():
    with pytest.raises(AssertionError, match="thing: expected shape"):
        cu.check_shape(torch.zeros(2, 3), (2, 4), "thing")
    with pytest.raises(AssertionError, match="vals: values differ"):
        cu.check_close(torch.zeros(3), torch.ones(3), "vals")
    cu.check_close(torch.ones(3), np.ones(3), "same")
    with pytest.raises(NotImplementedError, match="needs a model"):
        cu.require(None, "a model")


def test_timer_synchronises_around_each_call_skips_warm_up_and_reports_the_median(monkeypatch):
    events, clock = [], iter(range(100))
    fake_time = type("FakeTime", (), {"perf_counter": staticmethod(lambda: events.append("clock") or next(clock)),
                                      "process_time": staticmethod(lambda: 0.0)})
    monkeypatch.setattr(cu.timing, "time", fake_time)
    monkeypatch.setattr(cu.timing, "synchronize", lambda device=None: events.append(f"sync {device}"))
    durations = iter([50, 1, 3, 2])  # the warm-up call is slow and must not count
    calls = []

    def work(x):
        calls.append(x)
        for _ in range(next(durations) - 1):  # each clock read advances the fake clock by 1
            next(clock)

    timing = cu.time_call(work, 7, repeats=3, warmup=1, device="cuda")
    assert calls == [7, 7, 7, 7]
    reads = [i for i, e in enumerate(events) if e == "clock"]
    assert len(reads) == 2 * 4 and all(events[i - 1] == "sync cuda" for i in reads)  # each read waits for the device
    assert timing.samples == (1, 3, 2) and timing.median == 2 and timing.min == 1 and float(timing) == 2
    with pytest.raises(ValueError, match="clock='process'"):
        cu.time_call(work, 1, clock="process", device="cuda")
    with pytest.raises(ValueError, match="repeats"):
        cu.time_call(work, 1, repeats=0)


def test_a_coarse_process_clock_still_gives_the_mean_time_of_a_short_call(monkeypatch):
    """A process clock counted in 4 ms ticks (Linux under a CPU-time limit, as when graded; Windows in 15.6 ms):
    single calls of 1 ms read 0 or 4 ms, and each sample adds calls up until the mean per call is right."""
    cpu, wall = [0.0], [0.0]

    def process_time():   # reading the clock costs a microsecond of CPU; it shows whole 4 ms ticks only
        cpu[0] += 1e-6
        return 0.004 * int(cpu[0] / 0.004)

    fake_time = type("FakeTime", (), {"process_time": staticmethod(process_time),
                                      "perf_counter": staticmethod(lambda: wall[0])})
    monkeypatch.setattr(cu.timing, "time", fake_time)
    cu.timing.process_clock_step.cache_clear()

    def work():   # 1 ms of CPU, a little more so that the readings drift through the ticks
        cpu[0] += 0.001 + 1e-7
        wall[0] += 0.001

    def idle():   # a sleep: wall time, no CPU
        wall[0] += 0.01

    try:
        assert 0.003 < cu.timing.process_clock_step() < 0.005   # the clock is seen to tick by 4 ms
        timing = cu.time_call(work, repeats=3, clock="process")
        assert all(abs(t - 0.001) < 0.0002 for t in timing.samples), timing.samples
        # a call that uses no CPU ends its sample after SAMPLE_WALL_S of wall time, reading 0
        assert cu.time_call(idle, repeats=1, warmup=0, clock="process").samples == (0.0,)
        assert wall[0] >= cu.timing.SAMPLE_WALL_S
    finally:
        cu.timing.process_clock_step.cache_clear()


def test_timer_times_real_work_and_passes_setup_results():
    sizes = []
    timing = cu.time_call(lambda x: sizes.append(x.numel()), setup=lambda: torch.zeros(3), repeats=2, warmup=0)
    assert sizes == [3, 3] and len(timing.samples) == 2 and all(t >= 0 for t in timing.samples)
    slow = cu.time_call(torch.mm, torch.randn(200, 200), torch.randn(200, 200), repeats=3)
    assert slow.median > 0 and slow.clock == "wall"


# ------------------------------------------------------------ forbidden operators, in every thread

@pytest.fixture
def only_new_children(monkeypatch):
    """This test process may already have children (earlier tests' graders): count only those started now."""
    from course_utils import processes
    real, existing = processes.child_processes, set(processes.child_processes())
    monkeypatch.setattr(processes, "child_processes", lambda: [p for p in real() if p not in existing])


def _refused(fn):
    from course_utils.checks import ForbiddenCall
    try:
        fn()
    except ForbiddenCall as e:
        return e.forbidden
    return None


def test_processes_started_notes_a_new_process_and_one_already_running(only_new_children):
    import subprocess
    import sys

    from course_utils.processes import processes_started
    with processes_started() as quiet:
        torch.ones(3).sum()
    with processes_started() as started:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with processes_started() as during:
            pass
    finally:
        running.kill()
        running.wait()
    assert quiet == [] and started == ["subprocess.Popen"] and during == ["running"]


def test_forbid_names_the_function_called_through_any_alias():
    x = torch.randn(2, 3, 4)
    with cu.forbid("torch.nn.functional.scaled_dot_product_attention"):
        assert _refused(lambda: torch.ops.aten.scaled_dot_product_attention(x, x, x)).endswith("attention")
        assert _refused(lambda: torch.softmax(x, -1)) is None
    assert F.scaled_dot_product_attention(x, x, x).shape == x.shape


@pytest.mark.parametrize("route", ["thread", "modes off", "composite", "matmul family"])
def test_the_dispatcher_refuses_a_forbidden_operator_in_every_thread(route, only_new_children):
    from concurrent.futures import ThreadPoolExecutor

    from course_utils.refusals import forbidden_in_every_thread
    x = torch.randn(3, 5, dtype=torch.float64)
    names = ("torch.matmul",) if route == "matmul family" else ("torch.softmax",)

    def run():
        if route == "thread":
            return ThreadPoolExecutor(1).submit(torch.softmax, x, -1).result()
        if route == "modes off":
            with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
                return torch.softmax(x, -1)
        if route == "composite":  # the math attention is composite: its softmax is what computes
            return torch.ops.aten._scaled_dot_product_attention_math(x[None], x[None], x[None])
        return torch.einsum("ij,kj->ik", x, x)

    with forbidden_in_every_thread(*names):
        assert _refused(run) == names[0]
        assert torch.equal(torch.exp(x) + 0, torch.exp(x) * 1)      # everything else still computes
    assert run() is not None                                          # and the operator is back after the block


def test_a_refused_kernel_put_back_by_the_call_ends_the_refusal_whichever_it_is(only_new_children):
    """The grader's kernel side checks intact() after each call; with it in every thread, the dispatch mode is left
    out there, so every refused kernel must be checked, not one of them (a call re-registering the math softmax,
    not the first kernel refused, went unseen)."""
    import warnings

    from course_utils.refusals import forbidden_in_every_thread
    x = torch.randn(3, 5, dtype=torch.float64)
    with forbidden_in_every_thread("torch.softmax") as intact:
        assert intact()
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("_softmax", lambda t, dim, half: torch.exp(t) / torch.exp(t).sum(dim, keepdim=True), "CPU")
        assert not intact()
        lib._destroy()
    assert torch.allclose(torch.softmax(x, -1), torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))


def test_no_process_starts_while_an_operator_is_forbidden_and_none_may_be_running(only_new_children):
    import subprocess
    import sys

    from course_utils.refusals import forbidden_in_every_thread
    with forbidden_in_every_thread("torch.softmax"):
        assert _refused(lambda: subprocess.run([sys.executable, "-c", "pass"])) == "torch.softmax"
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _refused(lambda: forbidden_in_every_thread("torch.softmax").__enter__()) == "torch.softmax"
    finally:
        helper.kill()
        helper.wait()
    with forbidden_in_every_thread("torch.softmax"):
        pass
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0
