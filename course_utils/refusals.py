"""Refusals: the operators a test forbids, refused by what runs, in every path and every thread.

`forbid(...)` refuses the named operators (a torch function mode for the Python names, a dispatch mode for the
aten kernels underneath, and, in grading, the kernels themselves for the whole process: forbidden_in_every_thread);
`launcher_only(...)` allows only what a Triton launcher needs. Each open block is recorded in ambient.AMBIENT,
so the grader sends the names with its calls to the student's kernel."""
import contextlib
import functools
import importlib

import torch

from .ambient import AMBIENT
from .checks import refusal
from . import processes


from .refusal_table import COMPUTING_KEYS, KERNELS, LAUNCHER_OPS


def _kernel_name_matches(op_name, short, kernels=None):
    """True if the aten operator `op_name` (no overload) computes what the forbidden `short` name does (by `kernels`,
    a refusal table's KERNELS: the grader passes the one it sends with the request; else refusal_table's)."""
    return any(op_name.startswith(p[:-1]) if p.endswith("*") else op_name == p
               for p in (KERNELS if kernels is None else kernels).get(short, (short,)))


@contextlib.contextmanager
def forbidden_ops(*dotted_names, reason="this exercise asks you to build it yourself", kernels=None, aten=True):
    """Refuse the named operators by what runs, not by the name they are bound to.

    A TorchFunctionMode sees every call of a torch function (an alias, a default argument, a
    functools.partial or a closure all end in the same function object), and a TorchDispatchMode
    sees the aten operators underneath (`torch.ops.aten.scaled_dot_product_attention`, fused kernels).
    aten=False leaves the dispatch mode out: the grader's kernel side, where forbidden_in_every_thread refuses the
    same aten kernels in the dispatcher itself (a dispatch mode in Python on top made every operator of a measured
    call a Python call: lesson 9's tiled backward pass ran 1.5x slower).
    """
    from torch.overrides import TorchFunctionMode

    from .modes import EagerDispatchMode
    short = {d.rsplit(".", 1)[-1]: d for d in dotted_names}
    table = dict(KERNELS if kernels is None else kernels)  # a copy: the table changed as data during a call is not this
    originals = []
    for dotted in dotted_names:
        module_name, attr = dotted.rsplit(".", 1)
        try:
            originals.append((getattr(importlib.import_module(module_name), attr), dotted))
        except (ImportError, AttributeError):
            pass

    class RefuseFunctions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            for original, dotted in originals:
                if func is original:
                    raise refusal(dotted, reason)
            name = getattr(func, "__name__", "")
            if name in short:
                raise refusal(short[name], reason)
            return func(*args, **(kwargs or {}))

    computes = {}  # aten operator name -> the forbidden name it computes, or None: looked up once in the block

    class RefuseAten(EagerDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = getattr(getattr(func, "overloadpacket", func), "__name__", "")
            if name not in computes:
                computes[name] = next((dotted for forbidden_short, dotted in short.items()
                                       if _kernel_name_matches(name, forbidden_short, table)), None)
            if computes[name] is not None:
                raise refusal(computes[name], reason)
            return func(*args, **(kwargs or {}))

    with RefuseFunctions(), (RefuseAten() if aten else contextlib.nullcontext()):
        yield


@contextlib.contextmanager
def forbidden_in_every_thread(*dotted_names, reason="this exercise asks you to build it yourself", kernels=None,
                              keys=None):
    """Refuse the named operators' aten kernels for the whole process while the block runs; yields intact(), True
    while the refusal still holds (its kernels found where they were put: a call that destroyed or reset the
    registration from inside, through a Library found by the garbage collector or weakref's finalizers, ended it).

    forbidden_ops' modes are per thread and can be switched off (torch._C.DisableTorchFunction, a popped mode
    stack); a kernel registered in PyTorch's dispatcher is reached from every thread, through custom ops and
    composite operators, whatever modes are on. The grader's kernel side wraps a forbidding request in both:
    nothing but the student's call runs in that process meanwhile. kernels, keys: the refusal table's KERNELS and
    COMPUTING_KEYS (the grader passes those it sends with the request; else refusal_table's).
    """
    import warnings
    if not dotted_names:
        yield lambda: True
        return
    if processes.child_processes():  # started before the call, it could compute what the call hands it
        raise refusal(dotted_names[0], "a process your code started earlier is still running, and while a test "
                      "forbids an operator nothing may run outside this process (end it before the test)")
    lib = torch.library.Library("aten", "IMPL")
    processes.install_process_guard()
    AMBIENT.no_new_processes.append(dotted_names[0])
    table = tuple((k, tuple(v)) for k, v in (KERNELS if kernels is None else kernels).items())
    try:
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": that is the point
            warnings.simplefilter("ignore")
            refused = _computing_kernels(tuple(dotted_names), table, tuple(COMPUTING_KEYS if keys is None else keys))
            for op, key, dotted in refused:
                lib.impl(op, functools.partial(_refused_kernel, dotted, reason), key)
        expected = _dispatch_lines(refused)
        yield lambda: _dispatch_lines(refused) == expected  # every kernel put, not one overridden (2.5 ms for 91)
    finally:
        AMBIENT.no_new_processes.pop()
        lib._destroy()


def _dispatch_lines(refused):
    """{(op, key): its line of the dispatch table} for the refused kernels [(op, key, name)], each op's table read once."""
    tables = {op: torch._C._dispatch_dump_table(f"aten::{op}").splitlines() for op in {op for op, _, _ in refused}}
    return {(op, key): next((line for line in tables[op] if line.startswith(key + ":")), "") for op, key, _ in refused}


def _refused_kernel(dotted, reason, *args, **kwargs):
    raise refusal(dotted, reason)


@functools.lru_cache(maxsize=64)
def _computing_kernels(dotted_names, table, keys):
    """[(aten operator with overload, dispatch key, the forbidden name)] for every kernel that computes one of them,
    by `table` (KERNELS' items) at the dispatch keys `keys`."""
    kernels = dict(table)
    shorts = {d.rsplit(".", 1)[-1]: d for d in dotted_names}
    found = []
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        op = full[len("aten::"):]
        dotted = next((d for s, d in shorts.items() if _kernel_name_matches(op.split(".")[0], s, kernels)), None)
        if dotted is not None:
            found += [(op, key, dotted) for key in keys if torch._C._dispatch_has_kernel_for_dispatch_key(full, key)]
    return found


@contextlib.contextmanager
def launcher_only(*also):
    """While the block runs, the student's code may run only the PyTorch operators a launcher needs (allocate,
    view, copy, convert: LAUNCHER_OPS) and the aten operators named in `also` ("mul", "sum", ...); any other
    raises ForbiddenCall. So where an exercise asks a Triton kernel to compute, a result computed in PyTorch
    around a kernel that only copies is refused, whatever the kernel loads and stores. The grader sends the
    allow-list with its calls, like forbid's names; in this process it applies to this thread."""
    AMBIENT.launcher_only.append(tuple(also))
    try:
        with allowed_ops(*also):
            yield
    finally:
        AMBIENT.launcher_only.pop()


@contextlib.contextmanager
def allowed_ops(*also, reason="this exercise asks your Triton kernel to compute it; a launcher only allocates, "
                               "views and copies tensors and launches kernels", launcher_ops=None):
    """Refuse every aten operator but LAUNCHER_OPS (or the table `launcher_ops` the grader passes) and `also`, by what
    runs (a dispatch mode: any alias, any path)."""
    from .modes import EagerDispatchMode
    allowed = frozenset(LAUNCHER_OPS if launcher_ops is None else launcher_ops) | set(also)

    class AllowOnly(EagerDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = getattr(getattr(func, "overloadpacket", func), "__name__", "")
            if name not in allowed:
                raise refusal(f"torch.ops.aten.{name}", reason)
            return func(*args, **(kwargs or {}))

    with AllowOnly():
        yield


@contextlib.contextmanager
def forbid(*dotted_names, reason="this exercise asks you to build it yourself"):
    """Make operators unavailable while the block runs: `with forbid("torch.nn.functional.scaled_dot_product_attention"):`.

    Detected by what runs (see forbidden_ops), so no alias, partial, closure or `torch.ops` path
    gets around it. When the grader runs the test on its side, calls it makes to the student's
    code inside the block carry the same names to the student's kernel. Compute reference
    results outside the block.
    """
    AMBIENT.forbidden.append(tuple(dotted_names))
    try:
        with forbidden_ops(*dotted_names, reason=reason):
            yield
    finally:
        AMBIENT.forbidden.pop()
