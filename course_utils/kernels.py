"""Triton for lesson 11: where its kernels run, and the memory traffic and arithmetic they do, counted.

A @triton.jit kernel is compiled for a GPU. Without a CUDA GPU, Triton's interpreter runs the same kernel on
CPU tensors, one program after another, with numpy (`TRITON_INTERPRET=1`, read when a kernel is decorated):
`load_triton()` turns it on before the notebook defines any kernel. Its times mean nothing, but what the
kernel loads, stores and multiplies is exactly what the compiled kernel asks of memory and arithmetic units,
and `count_work()` counts it while the interpreter runs. On a GPU, `count_work()` runs the kernels launched
inside it in the interpreter too, on host copies of their arguments, so the counts are the same everywhere.

It holds no answer to a graded exercise: it counts whatever kernel the notebook launches.
"""
import contextlib
import dataclasses
import os
import re

import torch
from .ambient import AMBIENT

TRITON_FLOOR = (3, 4)  # pyproject.toml's floor: triton.knobs, which count_work uses on a GPU, is new in 3.4
_TRITON_MISSING = (
    "This lesson needs Triton, and it is not installed here. On Linux (x86-64 or ARM64): "
    "`python -m pip install triton` (or the course's `pip install -r requirements.txt`). On macOS or Windows "
    "Triton has no package: open the lesson in Google Colab (the badge at the top), which ships Triton, with "
    "or without a GPU runtime.")


def load_triton():
    """Import Triton for this machine: compiled kernels with a CUDA GPU, its interpreter without one, and the
    interpreter while nbgrader grades (NBGRADER_EXECUTION), so that a grade is the same on every machine.

    Call it before defining any @triton.jit kernel (the choice is made when a kernel is decorated).
    returns (triton, triton.language, interpreted: bool)
    """
    from .device_sim import is_simulating
    # the simulated GPU (COURSE_DEVICE=sim, tests/lessons/test_device.py) keeps kernels in compiled mode as a GPU
    # does, so that the path count_work takes there (compiled kernels run in the interpreter) is the one tested
    on_a_gpu = torch.cuda.is_available() or is_simulating()
    if not on_a_gpu or os.environ.get("NBGRADER_EXECUTION"):
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
        import triton.language as tl
    except ImportError as error:
        raise ImportError(_TRITON_MISSING) from error
    found = tuple(int(part) for part in re.findall(r"\d+", triton.__version__)[:2])
    if found < TRITON_FLOOR:  # count_work runs compiled kernels through triton.knobs, new in Triton 3.4
        raise ImportError(f"This lesson needs Triton {'.'.join(map(str, TRITON_FLOOR))} or newer; this machine has "
                          f"{triton.__version__}: `python -m pip install -U triton`.")
    _interpret_device_calls()
    if is_simulating() and not torch.cuda.is_available():
        _simulate_compiled_launches()
    return triton, tl, is_interpreted()


def _interpreted_run(jit_function, *args, grid, warmup, **kwargs):
    """JITFunction.run, in Triton's interpreter instead of compiled, as TRITON_INTERPRET=1 would run it."""
    from triton import knobs
    from triton.runtime import interpreter
    with knobs.runtime.scope():  # as under TRITON_INTERPRET=1 (constexpr functions return plain values)
        knobs.runtime.interpret = True
        return interpreter.InterpretedFunction(jit_function.fn).run(*args, grid=grid, warmup=warmup, **kwargs)


def _simulate_compiled_launches():
    """Under the simulated GPU there is no GPU to compile for: a compiled-mode kernel's launch runs in the
    interpreter, on the host copies of its arguments."""
    from triton.runtime.jit import JITFunction
    JITFunction.run = _interpreted_run


_INTERPRETING = [0]  # kernel launches the interpreter is running now (nested: a launch inside count_work's)


def _interpret_device_calls():
    """Let interpreted kernels call @triton.jit device functions that were compiled-mode when decorated.

    The interpreter is chosen when a function is decorated, so Triton's own tl.max, tl.sum, tl.exp2... are
    compiled-mode whenever Triton was imported before the interpreter was on (torch._dynamo imports it; on a GPU
    it is never on), and calling one from an interpreted kernel raises "Cannot call @triton.jit'd outside of
    the scope of a kernel". While the interpreter runs a launch, such a call is interpreted, as a device
    function decorated in interpreter mode is; outside a launch it still raises Triton's error.
    """
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    if getattr(JITFunction.__call__, "interprets_in_kernels", False):
        return
    outside_a_kernel, launch = JITFunction.__call__, interpreter.GridExecutor.__call__
    interpreted = {}  # id(JITFunction) -> its interpreted twin (a JITFunction's hash compiles its dependencies)

    def call(self, *args, **kwargs):
        if not _INTERPRETING[0]:
            return outside_a_kernel(self, *args, **kwargs)
        if id(self) not in interpreted:
            interpreted[id(self)] = interpreter.InterpretedFunction(self.fn)
        return interpreted[id(self)](*args, **kwargs)

    def interpreted_launch(self, *args, **kwargs):
        _INTERPRETING[0] += 1
        try:
            return launch(self, *args, **kwargs)
        finally:
            _INTERPRETING[0] -= 1

    call.interprets_in_kernels = True
    JITFunction.__call__, interpreter.GridExecutor.__call__ = call, interpreted_launch


def is_interpreted():
    """True when @triton.jit kernels defined now run in Triton's interpreter (on the CPU)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def accumulator(dtype):
    """The Triton dtype a kernel accumulates in for torch inputs of `dtype`: float64 for float64, float32 otherwise."""
    import triton.language as tl
    return tl.float64 if dtype == torch.float64 else tl.float32


def key_tiles(length, block_q, block_k, causal):
    """FlashAttention-2's forward schedule: for each program (query tile), the starts of the key tiles it loads,
    in loop order. Causal: the loop ends at min((tile + 1) * block_q, length), so no tile wholly above the
    diagonal is loaded."""
    return [list(range(0, min(i0 + block_q, length) if causal else length, block_k))
            for i0 in range(0, length, block_q)]


@dataclasses.dataclass(frozen=True)
class KernelWork:
    """What the kernels launched inside one `count_work()` asked for (read-only: only the counter adds to it).

    launches and programs: kernel launches and programs run (the grid's size, summed);
    loads, stores: `tl.load`/`tl.store` calls, over all programs; bytes_loaded, bytes_stored: the bytes of the
    elements their masks let through (what they ask of memory; caches and 32-byte sectors change what moves);
    dot_flops: 2 * M * N * K for every `tl.dot` of an (M, K) by a (K, N) tile; exponentials: elements through
    tl.exp or tl.exp2; reduced: elements fed to a reduction (tl.max, tl.sum, tl.reduce...);
    foreign_values (0 unless the grader runs your kernels): distinct float values the kernels loaded that are
    neither the call's inputs (or their casts) nor stored by an earlier kernel of the call: carried in from outside.
    """
    launches: int = 0
    programs: int = 0
    loads: int = 0
    bytes_loaded: int = 0
    stores: int = 0
    bytes_stored: int = 0
    dot_flops: int = 0
    exponentials: int = 0
    reduced: int = 0
    foreign_values: int = 0

    def absorb(self, counts):
        """Add counts made elsewhere ({field: int}; the grader's tests count the work of calls to your kernel)."""
        for field in dataclasses.fields(self):
            _add(self, field.name, int(counts.get(field.name, 0)))

    @property
    def bytes_moved(self):
        return self.bytes_loaded + self.bytes_stored

    def __str__(self):
        return (f"{self.launches} launch(es), {self.programs} programs; {self.loads} loads ({self.bytes_loaded:,} B), "
                f"{self.stores} stores ({self.bytes_stored:,} B); {self.dot_flops:,} FLOPs in tl.dot; "
                f"{self.exponentials:,} exponentials; {self.reduced:,} elements reduced")


_PATCHED = {}  # (owner, attribute) -> Triton's own, while any block is open


def _add(work, name, value):
    object.__setattr__(work, name, getattr(work, name) + value)  # (frozen: a launcher cannot set a count)


def counting():
    """The count_work blocks now open, innermost last (the grader counts its remote calls for them)."""
    return list(AMBIENT.work)


def _itemsize(handle):
    return int(getattr(handle.data, "itemsize", 0) or handle.data.dtype.itemsize)


def _elements(mask, ptrs):
    import numpy as np
    return int(np.count_nonzero(np.broadcast_to(mask.data, ptrs.data.shape)))


_COUNTED = ("create_masked_load", "create_masked_store", "create_dot", "set_grid_idx", "create_atomic_rmw",
            "create_atomic_cas", "create_descriptor_gather", "create_descriptor_scatter", "create_exp", "create_exp2")


def _install():
    """Route the interpreter's loads, stores, tile products, programs and launches to the innermost block."""
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    _interpret_device_calls()
    builder, executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    _PATCHED.update({(builder, n): builder.__dict__[n] for n in _COUNTED})
    _PATCHED[(executor, "__call__")] = executor.__dict__["__call__"]
    _PATCHED[(JITFunction, "run")] = JITFunction.__dict__["run"]
    _PATCHED[(interpreter.ReduceOps, "apply")] = reduce = interpreter.ReduceOps.__dict__.get(
        "apply", interpreter.ReduceOps.apply)
    for name, counted in _counting({n: _PATCHED[(builder, n)] for n in _COUNTED}).items():
        setattr(builder, name, counted)
    launch = _PATCHED[(executor, "__call__")]

    def counted_reduce(self, input):  # (a lone tensor comes back as a tuple of one: counted then)
        if isinstance(input, tuple) and input:
            _add_to_open(reduced=int(input[0].handle.data.size))
        return reduce(self, input)

    interpreter.ReduceOps.apply = counted_reduce

    def counted_launch(self, *args, **kwargs):
        _add_to_open(launches=1)
        return launch(self, *args, **kwargs)

    executor.__call__, JITFunction.run = counted_launch, _interpreted_run  # a compiled kernel (GPU): interpreted


def _add_to_open(**counts):
    """Add to every open block: a block opened inside another (the student's own) hides nothing."""
    for work in AMBIENT.work:
        for name, value in counts.items():
            _add(work, name, value)


def _counting(original):
    """{builder method: the method counting what it moves or computes}, around original[name]."""
    load, store, dot, set_grid_idx, rmw, cas, gather, scatter, exp, exp2 = (original[n] for n in _COUNTED)
    add = _add_to_open

    def counted_load(self, ptrs, mask, other, *args, **kwargs):
        result = load(self, ptrs, mask, other, *args, **kwargs)
        add(loads=1, bytes_loaded=_elements(mask, ptrs) * _itemsize(result))
        return result

    def counted_store(self, ptrs, value, mask, *args, **kwargs):
        add(stores=1, bytes_stored=_elements(mask, ptrs) * _itemsize(value))
        return store(self, ptrs, value, mask, *args, **kwargs)

    def counted_dot(self, a, b, *args, **kwargs):
        batch = 1
        for n in a.data.shape[:-2]:
            batch *= int(n)
        add(dot_flops=2 * a.data.shape[-2] * a.data.shape[-1] * b.data.shape[-1] * batch)
        return dot(self, a, b, *args, **kwargs)

    def counted_program(self, x, y, z):
        add(programs=1)
        return set_grid_idx(self, x, y, z)

    def counted_rmw(self, op, ptrs, value, mask, *args, **kwargs):  # tl.atomic_add & co: a read and a write
        size = _elements(mask, ptrs) * _itemsize(value)
        add(loads=1, bytes_loaded=size, stores=1, bytes_stored=size)
        return rmw(self, op, ptrs, value, mask, *args, **kwargs)

    def counted_cas(self, ptrs, compare, value, *args, **kwargs):
        size = int(ptrs.data.size) * _itemsize(value)
        add(loads=1, bytes_loaded=size, stores=1, bytes_stored=size)
        return cas(self, ptrs, compare, value, *args, **kwargs)

    def counted_gather(self, *args, **kwargs):
        result = gather(self, *args, **kwargs)
        add(loads=1, bytes_loaded=int(result.data.size) * _itemsize(result))
        return result

    def counted_scatter(self, desc, value, *args, **kwargs):
        add(stores=1, bytes_stored=int(value.data.size) * _itemsize(value))
        return scatter(self, desc, value, *args, **kwargs)

    def counted_exponential(original):
        return lambda self, arg: (add(exponentials=int(arg.data.size)), original(self, arg))[1]

    return dict(zip(_COUNTED, (counted_load, counted_store, counted_dot, counted_program, counted_rmw, counted_cas,
                               counted_gather, counted_scatter, counted_exponential(exp), counted_exponential(exp2))))


def _uninstall():
    for (owner, name), original in _PATCHED.items():
        setattr(owner, name, original)
    _PATCHED.clear()


@contextlib.contextmanager
def count_work():
    """Count the loads, stores (atomics too) and tile products of the Triton kernels launched inside the block.

        with count_work() as work:
            softmax_rows(x)
        print(work.bytes_loaded)

    Kernels run in Triton's interpreter while counted (on a GPU too: host copies of their arguments go in,
    results are copied back), so count small problems. Every block open counts everything run inside it, so a
    block inside another counts part of what the outer one counts, and hides nothing from it.
    """
    work = KernelWork()
    if not AMBIENT.work:
        _install()
    AMBIENT.work.append(work)
    try:
        yield work
    finally:
        del AMBIENT.work[next(i for i, block in enumerate(AMBIENT.work) if block is work)]  # by identity: equal counts differ
        if not AMBIENT.work:
            _uninstall()


def count_eager_bytes(fn, *args, **kwargs):
    """(result, bytes read, bytes written) of fn run eagerly: every PyTorch operator it calls is taken to read
    each of its tensor inputs once and write each of its outputs once (what an unfused operator does in main
    memory). Views move nothing and are not counted: an operator whose schema says it returns a view, or
    whose outputs all share an input's storage (aten._unsafe_view, which `a @ b` on 4-D tensors ends in, has no
    alias annotation); neither are empty allocations.
    """
    from torch.utils._pytree import tree_leaves

    from .modes import EagerDispatchMode

    traffic = {"read": 0, "written": 0}

    def nbytes(values):
        return sum(t.numel() * t.element_size() for t in tree_leaves(values) if isinstance(t, torch.Tensor))

    def storage(t):
        try:
            return t.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):  # a tensor with no storage of its own
            return None

    class EagerTraffic(EagerDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            returns = func._schema.returns
            is_view = any(r.alias_info is not None and not r.alias_info.is_write for r in returns)
            outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            inputs = {storage(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
            shares_storage = bool(outputs) and all(storage(t) in inputs for t in outputs) and not \
                any(r.alias_info is not None and r.alias_info.is_write for r in returns)  # (in place: it writes)
            if not is_view and not shares_storage and not func.__name__.startswith("empty"):
                traffic["read"] += nbytes((args, kwargs))
                traffic["written"] += nbytes(out)
            return out

    with EagerTraffic():
        result = fn(*args, **kwargs)
    return result, traffic["read"], traffic["written"]
