"""The kernel's side, part 5: the watches a call runs under (forbidden operators, memory meters) and what
they cannot see (work on other threads, data taken out of torch).

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define, the refusal table's KERNELS, COMPUTING_KEYS and LAUNCHER_OPS among them
(tests/autograder/test_modules.py checks)."""
class _Stack:
    """Context managers entered one by one and left in reverse (contextlib's ExitStack, as this code's own)."""

    def __init__(self):
        self.entered = []

    def enter(self, manager):
        value = _type(manager).__enter__(manager)
        self.entered.append(manager)
        return value

    def close(self, error=None):
        """Leave every block; re-raises `error` (or what a block's exit raised instead)."""
        while self.entered:
            manager = self.entered.pop()
            try:
                _type(manager).__exit__(manager, None if error is None else _type(error), error,
                                        None if error is None else error.__traceback__)
            except BaseException as e:  # noqa: BLE001: as a with statement would, the later error wins
                error = e
        if error is not None:
            raise error


def _forbidding(stack, refusals, everywhere=()):
    """The test's forbidden operators refused during the call by modes in this thread (which name the function the
    code called: a function mode, and a dispatch mode for the aten kernels unless `everywhere`, the request's
    _refusing_everywhere block, refuses those kernels in the dispatcher already); `only`, the test's launcher_only
    allow-list (None: none), by a dispatch mode in this thread. Both read the refusal table sent with this program
    (refusal_table.py's KERNELS and LAUNCHER_OPS), never the kernel's copy. Returns the blocks held, for
    _still_refusing."""
    names, only = refusals
    if only is None and not names:
        return ()
    import course_utils.refusals as refusals_of_course_utils
    held = ()
    if only is not None:
        held += _held(stack, refusals_of_course_utils.allowed_ops(*only, launcher_ops=LAUNCHER_OPS))
    if names:
        held += _held(stack, refusals_of_course_utils.forbidden_ops(*names, kernels=KERNELS, aten=not everywhere))
    return held


def _refusing_everywhere(stack, names):
    """In a grading kernel, the forbidden operators' kernels replaced in PyTorch's dispatcher for every thread (no
    thread, custom op or disabled mode gets past it), from before the call until its answer has left the kernel
    (serve._serve): so a thread or a formatter that runs once the call is over still finds them refused. Returns
    the block held, for _still_refusing."""
    if not names or not _LENDING["in_kernel"]:
        return ()
    import course_utils.refusals as refusals_of_course_utils
    return _held(stack, refusals_of_course_utils.forbidden_in_every_thread(*names, kernels=KERNELS,
                                                                          keys=COMPUTING_KEYS))


def _held(stack, block):
    """((generator, intact or None),): a refusal block entered, with what tells later whether it still holds."""
    intact = stack.enter(block)
    gen = getattr(block, "gen", None)  # (contextlib's block: its generator, taken now, before the student's code runs)
    return ((gen, intact if callable(intact) else None),)


def _still_refusing(held):
    """Raise Unrefused unless every refusal block the request entered still holds as the call returns: a block
    exited early (found by the garbage collector, say) has finished its generator, which nothing can resume, and
    the dispatcher's refusal checks its own kernels (forbidden_in_every_thread's intact)."""
    for gen, intact in held:
        if (gen is not None and gen.gi_frame is None) or (intact is not None and not intact()):
            raise Unrefused("the refusal was switched off during the call")


def _measuring(stack, meters):
    """What the call does, measured as the test asked: "memory", the tensors it allocates (as
    course_utils.memory.TensorMemory counts them, and, unless the cgroup decides on a machine without a GPU, as
    allocations.AllocatedMemory counts them one level lower, where TorchScript and autograd's own operators are
    seen too: the larger figures count); "work": in a grading
    kernel its Triton launches go to the grader, which runs and counts them (_LaunchesElsewhere), so nothing is
    measured here. Returns {meter: measurement}. In a grading kernel a memory measurement also notes work its meters (this thread's
    torch modes) cannot see: "unseen", a list of UNSEEN's words; not where the grader decides the call's memory from
    outside the kernel ("resident"), whose cgroup sees other threads, processes and numpy itself (the watch's profile
    hook and profiler made such a call several times slower: lesson 9's memory tests took 12 s against 8 s)."""
    meters = meters if type(meters) is tuple else ()
    taken = {}
    if "memory" in meters:
        import torch

        from course_utils.allocations import AllocatedMemory
        from course_utils.memory import TensorMemory
        if _LENDING["in_kernel"] and "resident" not in meters:
            taken["unseen"] = stack.enter(_WorkElsewhere())
        taken["memory"] = (stack.enter(TensorMemory()),)
        # where the cgroup decides, it sees autograd's and TorchScript's host memory itself: the count one level
        # lower (a Python call at every aten operator, the measured call twice as slow) runs only where memory
        # could go to a GPU, which the cgroup does not see
        if "resident" not in meters or torch.cuda.is_available() or torch.backends.mps.is_available():
            taken["memory"] += (stack.enter(AllocatedMemory()),)
    if "work" in meters and _LENDING["in_kernel"]:  # (in the grader's own process its open blocks count the call)
        stack.enter(_LaunchesElsewhere())
    return taken




_CALL_MARK = "autograder::measured_call"
UNSEEN = {  # what a memory measurement's meters cannot see, by the word the kernel reports
    "thread": "ran torch operators in another thread",
    "process": "started a process, or ran while one it started was running",
    "numpy": "took a tensor out of torch (to numpy or a list), where no tensor count sees it",
    "unwatched": "switched off the grader's watch on the call (sys.setprofile)",
}
_BRIDGES = {"numpy", "tolist", "untyped_storage", "data_ptr", "__array__", "__dlpack__"}  # a tensor's data leaving torch
_BRIDGE_MIN = 1024  # elements taken out in one call: a test's inputs are larger, an index or a scalar is not


class _WorkElsewhere:
    """Entered, a list that gets, as the block ends, the UNSEEN words of what the call did out of its memory
    meters' sight (they watch torch calls in this thread): torch operators on another thread (PyTorch's profiler,
    watching every thread), a process started or running (an audit hook), a tensor taken to numpy or a list
    (`_bridge_watch`, a profile hook), that hook switched off."""

    def __enter__(self):
        import threading

        from torch._C._profiler import _ExperimentalConfig
        from torch.autograd.profiler import profile, record_function  # (torch.profiler's imports torch._dynamo: 2 s)

        import course_utils.processes as processes
        self.unseen, (self.watch, self.bridged) = [], _bridge_watch()
        self.every_thread = getattr(threading, "setprofile_all_threads", None)  # Python 3.12: threads running too
        self.threading, self.before, self.before_threads = threading, sys.getprofile(), threading.getprofile()
        self.inner = _Stack()
        self.started = self.inner.enter(processes.processes_started())
        self.profiler = self.inner.enter(profile(use_kineto=True, experimental_config=_ExperimentalConfig(
            profile_all_threads=True)))
        threading.setprofile(self.watch)  # threads started during the call
        sys.setprofile(self.watch)
        if self.every_thread:
            self.every_thread(self.watch)
        self.inner.enter(record_function(_CALL_MARK))
        return self.unseen

    def __exit__(self, kind, error, traceback):
        mark = self.inner.entered.pop()  # the call's mark ends first, then the watch, then the profiler
        try:
            _type(mark).__exit__(mark, None, None, None)
        finally:
            watched = sys.getprofile() is self.watch
            if self.every_thread:
                self.every_thread(None)
            sys.setprofile(self.before)
            self.threading.setprofile(self.before_threads)
            self.inner.close()
        self.unseen += ["process"] * bool(self.started) + ["numpy"] * bool(self.bridged) + \
            ["unwatched"] * (not watched)
        self.unseen += ["thread"] * _operators_on_other_threads(self.profiler)


def _bridge_watch():
    """(profile function, list): the list gets the name of a bridge (_BRIDGES) once the watched code has taken
    _BRIDGE_MIN elements or more from tensors to numpy, DLPack or Python data, in one call or in many smaller ones
    (a .numpy() of 512 elements at a time adds up); `.tolist()` counts per call (a decoding loop may list a few
    tokens at every step). torch's and the grader's own calls excepted."""
    import os

    import torch

    import course_utils
    own = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, course_utils)) + ("<autograder",)
    python_code = {torch.Tensor.__array__.__code__: "__array__", torch.Tensor.__dlpack__.__code__: "__dlpack__"}
    bridged, taken = [], [0]

    def watch(frame, event, arg):
        if event == "c_call":  # tensor.numpy(), .tolist(), ...: arg is the bound method
            owner, name, caller = getattr(arg, "__self__", None), getattr(arg, "__name__", None), frame
        elif event == "call" and frame.f_code in python_code:  # np.asarray(tensor), np.from_dlpack(tensor)
            owner, name, caller = frame.f_locals.get("self"), python_code[frame.f_code], frame.f_back
        else:
            return
        if name in _BRIDGES and isinstance(owner, torch.Tensor) \
                and not (caller and caller.f_code.co_filename.startswith(own)):
            if name == "tolist":
                if owner.numel() >= _BRIDGE_MIN:
                    bridged.append(name)
                return
            taken[0] += owner.numel()
            if taken[0] >= _BRIDGE_MIN:
                bridged.append(name)

    return watch, bridged


def _operators_on_other_threads(profiler):
    """Whether the profiler saw a torch operator on a thread other than the one that ran _CALL_MARK (with CUDA,
    autograd's own device threads, whose first event is the engine's, excepted)."""
    import torch
    by_thread = {}
    for e in profiler.kineto_results.events():
        by_thread.setdefault(e.start_thread_id(), []).append((e.start_ns(), e.name()))
    calling = {tid for tid, events in by_thread.items() if any(name == _CALL_MARK for _, name in events)}
    engine = torch.cuda.is_initialized()
    return any(tid not in calling and not (engine and min(events)[1].startswith("autograd::engine::"))
               for tid, events in by_thread.items())


def _measurements(taken):
    """The answer's figures from _measuring's measurements: plain ints and allow-listed words only."""
    figures = {}
    if "memory" in taken:
        figures["memory"] = [max(int(meter.peak_bytes) for meter in taken["memory"]),
                             max(int(meter.largest_bytes) for meter in taken["memory"])]
    if "unseen" in taken:
        figures["unseen"] = sorted({word for word in taken["unseen"] if word in UNSEEN})
    return figures
