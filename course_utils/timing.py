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
"""
import statistics
import time
from dataclasses import dataclass

import torch

__all__ = ["Timing", "time_call", "synchronize"]


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
    `warmup` calls are run first and not counted; the `repeats` timed calls give the median.
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
    samples = []
    for n in range(warmup + repeats):
        state = setup() if setup is not None else None
        synchronize(device)
        start = read()
        if setup is not None:
            fn(state)
        else:
            fn(*args, **kwargs)
        synchronize(device)
        if n >= warmup:
            samples.append(read() - start)
    return Timing(tuple(samples), warmup, clock)
