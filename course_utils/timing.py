"""The course's one timer: how long a piece of PyTorch work takes, measured the same way in every lesson.

What `time_call` measures: the time from just before `fn(...)` is called to just after the device
has finished every kernel it launched. On a GPU (CUDA or Apple MPS) PyTorch returns from most calls
as soon as the work is queued, so reading the clock without waiting would time the launch, not the
work; `time_call` therefore synchronises the device before starting the clock and again before
stopping it. The first `warmup` calls are run but not counted (they pay for lazy initialisation,
memory allocation, kernel selection, caches); then `repeats` calls are timed one by one and the
median is reported, which one slow outlier (another program, a garbage collection) does not move.

Two clocks:
* ``"wall"`` (the default): `time.perf_counter`, elapsed real time. Other programs on the machine
  inflate it.
* ``"process"``: `time.process_time`, CPU seconds used by this process (all its threads added up).
  Other programs do not inflate it, but it does not see work done on a GPU, and with several torch
  threads it counts each thread's time, so it can exceed the wall time. CPU only.

  This clock can tick coarsely: Windows counts it in 15.6 ms steps, and Linux in scheduler ticks
  (4 ms) while a CPU-time limit is set, as the course's grader sets one. A call shorter than a tick
  would read 0 or a whole tick. So when the clock is seen to step by more than 0.1 ms, each
  sample calls `fn` again until it has added up `TICKS_PER_SAMPLE` steps (or a second of wall time
  has passed), and is the mean per call: ticks land at random moments, so the mean is right even
  when every single call reads 0 or a whole tick. A fine clock times every call on its own.
"""
import functools
import statistics
import time
from dataclasses import dataclass

import torch

__all__ = ["Timing", "time_call", "synchronize"]

COARSE_STEP_S = 1e-4    # a process clock stepping by more than this ticks (a fine one steps by microseconds)
TICKS_PER_SAMPLE = 10   # a coarse process clock: the steps one sample adds up (40 ms with 4 ms ticks)
SAMPLE_WALL_S = 1.0     # ... unless this much wall time has passed (fn may use no CPU at all)


@functools.lru_cache(maxsize=None)
def process_clock_step():
    """Seconds: the largest of three steps `time.process_time()` is seen to take (a few ns, or a tick)."""
    steps = []
    for _ in range(3):
        start = now = time.process_time()
        while now == start:
            now = time.process_time()
        steps.append(now - start)
    return max(steps)


def synchronize(device=None):
    """Wait until `device` ("cuda", "mps", a torch.device, or None for every accelerator in use) is idle."""
    kind = None if device is None else torch.device(device).type
    if kind in (None, "cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    mps = getattr(torch, "mps", None)
    if kind in (None, "mps") and mps is not None and torch.backends.mps.is_available():
        mps.synchronize()


@dataclass(frozen=True)
class Timing:
    """Seconds per call: `median` of the timed `samples` (warm-up calls excluded), and which `clock`."""

    samples: tuple
    warmup: int
    clock: str

    @property
    def median(self):
        return statistics.median(self.samples)

    @property
    def min(self):
        return min(self.samples)

    @property
    def ms(self):
        """The median in milliseconds."""
        return 1000 * self.median

    def __float__(self):
        return float(self.median)

    def __repr__(self):
        return (f"Timing(median={self.median * 1000:.3f} ms, min={self.min * 1000:.3f} ms, "
                f"repeats={len(self.samples)}, warmup={self.warmup}, clock={self.clock!r})")


def time_call(fn, *args, repeats=5, warmup=1, setup=None, device=None, clock="wall", **kwargs):
    """Time `fn(*args, **kwargs)` (or `fn(setup())` when `setup` is given): -> Timing, seconds per call.

    `setup`, when given, is called before every call and its result passed to `fn`; its time is not
    counted (build a fresh cache, zero the gradients, ...). `device` is where the work runs: it is
    synchronised before the clock starts and before it stops (None: every accelerator in use).
    `warmup` calls are run first and not counted; the `repeats` timed calls give the median (with the
    process clock, when it ticks coarsely, each of them a mean over several calls: see above).
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a function to time, got {type(fn).__name__}")
    if setup is not None and (args or kwargs):
        raise TypeError("pass either `setup` or arguments for fn, not both")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected an int >= 1, got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup: expected an int >= 0, got {warmup!r}")
    if clock not in ("wall", "process"):
        raise ValueError(f"clock: expected 'wall' or 'process', got {clock!r}")
    if clock == "process" and device is not None and torch.device(device).type != "cpu":
        raise ValueError(f"clock='process' counts CPU time only and would miss the work on {device}: "
                         "use clock='wall' on a GPU")
    read = time.perf_counter if clock == "wall" else time.process_time

    def one_call():
        state = setup() if setup is not None else None
        synchronize(device)
        start = read()
        if setup is not None:
            fn(state)
        else:
            fn(*args, **kwargs)
        synchronize(device)
        return read() - start

    for _ in range(warmup):
        one_call()
    step = process_clock_step() if clock == "process" else 0.0
    least = TICKS_PER_SAMPLE * step if step > COARSE_STEP_S else 0.0
    samples = []
    for _ in range(repeats):
        total, calls = one_call(), 1
        if least:
            started = time.perf_counter()
            while total < least and time.perf_counter() - started < SAMPLE_WALL_S:
                total += one_call()
                calls += 1
        samples.append(total / calls)
    return Timing(tuple(samples), warmup, clock)
