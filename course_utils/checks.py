"""Assertion helpers for the notebooks' test cells: each failure says what was
expected, what came back, and where to look."""
import contextlib
import functools
import importlib
import sys

import numpy as np
import torch


def _as_array(x, name="value"):
    """A plain ndarray of x; tensors and arrays must be plain (a subclass could lie in comparisons)."""
    if isinstance(x, torch.Tensor):
        return plain_tensor(x, name).numpy()
    if isinstance(x, np.ndarray):
        return plain_array(x, name)
    if isinstance(x, (float, int)) and type(x) not in (int, float, bool) and not isinstance(x, np.generic):
        return np.asarray(plain_float(x, name))
    return np.asarray(x)


def check_shape(value, expected, name):
    """Assert that `value` (tensor or array) has shape `expected`; None in `expected` matches any size."""
    if not hasattr(value, "shape"):
        raise AssertionError(f"{name}: expected a tensor of shape {expected}, got a {type(value).__name__}")
    if isinstance(value, torch.Tensor):
        plain_tensor(value, name)
    elif isinstance(value, np.ndarray):
        plain_array(value, name)
    shape = tuple(int(s) for s in value.shape)
    if len(shape) != len(expected) or any(e is not None and e != s for e, s in zip(expected, shape)):
        raise AssertionError(f"{name}: expected shape {tuple(expected)}, got {shape}")


def check_close(actual, expected, name, atol=1e-5, rtol=1e-5, hint=""):
    """Assert that two tensors/arrays/numbers agree within tolerance."""
    a, e = _as_array(actual, name), _as_array(expected, name + " (expected)")
    if a.shape != e.shape:
        raise AssertionError(f"{name}: expected shape {e.shape}, got {a.shape}. {hint}".strip())
    if not np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=False):
        worst = np.unravel_index(np.nanargmax(np.abs(a - e)) if a.size else 0, a.shape) if a.size else ()
        raise AssertionError(f"{name}: values differ (largest gap at index {tuple(int(i) for i in worst)}: "
                             f"got {a[worst]!r}, expected {e[worst]!r}). {hint}".strip())


def check_true(condition, message):
    """Assert with a message that tells the student what went wrong."""
    if not bool(condition):
        raise AssertionError(message)


def require(value, what):
    """Stop a cell early, with a hint, when an earlier step has not produced `value` yet.

    Used by cells that need the result of an exercise: `require(model, "a trained
    model: finish Exercises 1-4 and run the training cell")`.
    """
    if value is None:
        raise NotImplementedError(f"This cell needs {what}.")
    return value


# ------------------------------------------------------------ plain values
# Hidden tests turn an answer into a plain value before comparing it, so that an
# object whose comparisons always say "equal" (a subclass of float, Tensor or
# ndarray) cannot pass a check.

_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def plain_tensor(value, name, dtype=None):
    """`value` as a plain, detached CPU `torch.Tensor`; refuses subclasses and other types.

    dtype: when given, the tensor must have exactly this dtype (the one the exercise asks for).
    """
    if type(value) not in _PLAIN_TENSORS:
        kind = "a subclass of torch.Tensor" if isinstance(value, torch.Tensor) else "a " + type(value).__name__
        raise AssertionError(f"{name}: expected a plain torch.Tensor, got {kind} ({type(value).__qualname__}). "
                             "Return the tensor your computation produced.")
    value = torch.Tensor.detach(value).cpu()  # a plain Tensor, a Parameter's data included
    if dtype is not None and value.dtype != dtype:
        raise AssertionError(f"{name}: expected dtype {dtype}, got {value.dtype}.")
    return value


def plain_array(value, name, dtype=None):
    """`value` as a plain `numpy.ndarray` (a numpy scalar becomes a 0-d array); refuses subclasses."""
    if type(value) is not np.ndarray and not (isinstance(value, np.generic) and type(value).__module__ == "numpy"):
        kind = "a subclass of numpy.ndarray" if isinstance(value, np.ndarray) else "a " + type(value).__name__
        raise AssertionError(f"{name}: expected a plain numpy.ndarray, got {kind} ({type(value).__qualname__}).")
    value = np.asarray(value)
    if dtype is not None and value.dtype != np.dtype(dtype):
        raise AssertionError(f"{name}: expected dtype {np.dtype(dtype)}, got {value.dtype}.")
    return value


def plain_float(value, name):
    """`value` (a Python/numpy number, or a one-element plain tensor or array) as a built-in float."""
    if type(value) in (int, float, bool):
        return float(value)
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and np.issubdtype(type(value), np.number):
        return float(value.item())
    if type(value) in _PLAIN_TENSORS or type(value) is np.ndarray:
        array = plain_tensor(value, name).numpy() if type(value) is not np.ndarray else value
        if array.size != 1:
            raise AssertionError(f"{name}: expected a single number, got an array of shape {tuple(array.shape)}.")
        return float(array.reshape(()).item())
    raise AssertionError(f"{name}: expected a number (int or float), got {type(value).__qualname__}.")


# ------------------------------------------------------------ forbidden operators

class ForbiddenCall(AssertionError):
    """Raised when an answer calls an operator the exercise asks the student to build."""

    def __init__(self, message, forbidden=""):
        super().__init__(message)
        self.forbidden = forbidden


# The aten operators that compute what each Python-level name a test may forbid computes ("x*": every operator
# whose name starts with x). Whatever path reaches them (an alias, torch.ops.aten, a composite operator, a custom
# op, another thread) ends in one of these. A name not listed stands for the aten operator of the same name.
_PRODUCTS = ("matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "inner", "outer",
             "ger", "addr", "einsum", "tensordot", "linear", "bilinear", "_trilinear", "chain_matmul",
             "linalg_multi_dot", "linalg_vecdot", "_addmm_activation", "_int_mm", "_sparse_mm", "_sparse_addmm",
             "sspaddmm", "_sparse_sparse_matmul", "_scaled_mm")
KERNELS = {
    "scaled_dot_product_attention": ("scaled_dot_product_attention", "_scaled_dot_product_*"),
    "multi_head_attention_forward": ("_native_multi_head_attention",),
    "softmax": ("softmax", "_softmax", "_safe_softmax", "special_softmax"),
    "log_softmax": ("log_softmax", "_log_softmax", "special_log_softmax"),
    "logsumexp": ("logsumexp", "special_logsumexp"),
    **{name: _PRODUCTS for name in ("matmul", "mm", "bmm", "baddbmm", "einsum")},
}
# the dispatch keys whose kernels compute (autograd and the Python keys only pass a call on)
_COMPUTING_KEYS = ("CPU", "CUDA", "MPS", "XPU", "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA",
                   "MkldnnCPU", "QuantizedCPU", "QuantizedCUDA", "NestedTensorCPU", "NestedTensorCUDA",
                   "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _kernel_name_matches(op_name, short):
    """True if the aten operator `op_name` (no overload) computes what the forbidden `short` name does."""
    return any(op_name.startswith(p[:-1]) if p.endswith("*") else op_name == p for p in KERNELS.get(short, (short,)))


_FORBIDDEN = []  # names forbidden by the enclosing `forbid` blocks (the grader sends them with its calls)


_IN_PLACE = []  # depth of the enclosing `in_place_allowed` blocks (the grader sends it with its calls)

_VERDICTS = {}  # {grade_id: passed} of the test cells the grader has run so far for this notebook (cu.charged)


def record_verdicts(verdicts):
    """The grader's test runner starts a notebook's record (an empty dict)."""
    _VERDICTS.clear()
    _VERDICTS.update(verdicts)


def record_verdict(grade_id, passed):
    _VERDICTS[grade_id] = bool(passed)


def charged(grade_id):
    """Whether the mistake a replay would blame on an earlier exercise was charged there: False when the grader
    ran that exercise's test cell and it passed. A test that replays the student's own earlier part (to charge a
    mistake once) may excuse a difference only when this is True; a helper right in its own test and wrong in the
    replay (a stateful helper) then excuses nothing. True where no grader is running (a student's own notebook)."""
    return _VERDICTS.get(grade_id) is not True


@contextlib.contextmanager
def in_place_allowed():
    """Inside, a student's function may change the tensors and arrays it is given, as in their notebook.

    In grading, the student's code gets copies of a test's tensors, and a call that changes one in
    place fails the test; a test that replays the student's own pieces (to charge a mistake once)
    wraps those calls in this block, and the changes are then copied back into the test's tensors.
    Outside grading it changes nothing.
    """
    _IN_PLACE.append(True)
    try:
        yield
    finally:
        _IN_PLACE.pop()


def in_place_allowed_now():
    """True inside an `in_place_allowed` block."""
    return bool(_IN_PLACE)


_STAND_INS = []  # {name: part} of the enclosing `standing_in` blocks (the grader sends them with its calls)


@contextlib.contextmanager
def standing_in(**parts):
    """Inside, the notebook's names given here mean the given parts: `with cu.standing_in(attend=_attend):`.

    A test of a later exercise runs it with correct earlier parts standing in for the student's, so
    a mistake in an earlier exercise is charged to that exercise only. The student's code sees them
    wherever it looks the name up when it runs (a call to the global `attend` inside a method).
    Run in a notebook, the names are rebound in the notebook's namespace for the block; in grading,
    calls made inside the block carry the parts to the student's kernel, lent (never sent), and
    gradients flow through them.
    """
    namespace = _notebook_namespace()
    saved = {name: namespace.get(name, _MISSING) for name in parts} if namespace is not None else {}
    _STAND_INS.append(dict(parts))
    try:
        if namespace is not None:
            namespace.update({name: _as_the_grader_runs_it(part) for name, part in parts.items()})
        yield
    finally:
        _STAND_INS.pop()
        for name, value in saved.items():
            if value is _MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def _as_the_grader_runs_it(part):
    """A test's function standing in, run in a notebook as grading runs it: outside the test's refusals (in grading
    it is lent and runs in the grader's process, where no forbid or launcher_only mode applies), gradients kept."""
    import types
    if not isinstance(part, types.FunctionType):
        return part

    @functools.wraps(part)
    def run(*args, **kwargs):
        with torch_modes_off():
            return part(*args, **kwargs)

    return run


@contextlib.contextmanager
def torch_modes_off():
    """Every torch function and dispatch mode off the stacks while the block runs, then put back (the grader's own
    code, run beside a test's refusals and meters: remote.py's lent objects, a stand-in in a notebook)."""
    from torch.utils._python_dispatch import _disable_current_modes
    popped = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        with _disable_current_modes():
            yield
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


_MISSING = object()
_CELL_STAND_INS = []  # `standing_in` blocks opened by cu.stand_in, closed when the running test cell ends


def stand_in(**parts):
    """`standing_in(**parts)` for the rest of the running test cell, visible part included.

    A test of a later exercise calls it in a hidden block at its top, so that a mistake in an
    earlier exercise (even one that raises) is charged to that exercise only. The grader ends
    it after the cell (end_cell); in a notebook it ends when the cell has run.
    """
    block = standing_in(**parts)
    block.__enter__()
    _CELL_STAND_INS.append(block)
    shell = _shell()
    if shell is not None and len(_CELL_STAND_INS) == 1:
        def after_cell(*_):
            shell.events.unregister("post_run_cell", after_cell)
            end_cell()
        shell.events.register("post_run_cell", after_cell)


def end_cell():
    """Close every `stand_in` of the cell that ran: the notebook's own names mean the student's parts again."""
    while _CELL_STAND_INS:
        _CELL_STAND_INS.pop().__exit__(None, None, None)


def _shell():
    """The running IPython shell, or None outside a kernel (the grader's process has none)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def _notebook_namespace():
    """The running notebook's global namespace (IPython's user namespace), or None outside a kernel."""
    return getattr(_shell(), "user_ns", None)


def stand_ins_now():
    """{name: part} of every `standing_in` block the caller is inside (inner blocks win)."""
    found = {}
    for parts in _STAND_INS:
        found.update(parts)
    return found


def forbidden_now():
    """The dotted names forbidden by every `forbid` block the caller is inside."""
    return tuple(name for names in _FORBIDDEN for name in names)


def _refuse(name, reason):
    return ForbiddenCall(f"{name} is not allowed here: {reason}.", forbidden=name)


@contextlib.contextmanager
def forbidden_ops(*dotted_names, reason="this exercise asks you to build it yourself"):
    """Refuse the named operators by what runs, not by the name they are bound to.

    A TorchFunctionMode sees every call of a torch function (an alias, a default argument, a
    functools.partial or a closure all end in the same function object), and a TorchDispatchMode
    sees the aten operators underneath (`torch.ops.aten.scaled_dot_product_attention`, fused kernels).
    """
    from torch.overrides import TorchFunctionMode

    from .modes import EagerDispatchMode
    short = {d.rsplit(".", 1)[-1]: d for d in dotted_names}
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
                    raise _refuse(dotted, reason)
            name = getattr(func, "__name__", "")
            if name in short:
                raise _refuse(short[name], reason)
            return func(*args, **(kwargs or {}))

    class RefuseAten(EagerDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = getattr(getattr(func, "overloadpacket", func), "__name__", "")
            for forbidden_short, dotted in short.items():
                if _kernel_name_matches(name, forbidden_short):
                    raise _refuse(dotted, reason)
            return func(*args, **(kwargs or {}))

    with RefuseFunctions(), RefuseAten():
        yield


@contextlib.contextmanager
def forbidden_in_every_thread(*dotted_names, reason="this exercise asks you to build it yourself"):
    """Refuse the named operators' aten kernels for the whole process while the block runs.

    forbidden_ops' modes are per thread and can be switched off (torch._C.DisableTorchFunction, a popped mode
    stack); a kernel registered in PyTorch's dispatcher is reached from every thread, through custom ops and
    composite operators, whatever modes are on. The grader's kernel side wraps a forbidding request in both:
    nothing but the student's call runs in that process meanwhile.
    """
    import warnings
    if not dotted_names:
        yield
        return
    if _child_processes():  # started before the call, it could compute what the call hands it
        raise _refuse(dotted_names[0], "a process your code started earlier is still running, and while a test "
                      "forbids an operator nothing may run outside this process (end it before the test)")
    lib = torch.library.Library("aten", "IMPL")
    _install_process_guard()
    _NO_NEW_PROCESSES.append(dotted_names[0])
    try:
        with warnings.catch_warnings():  # "Overriding a previously registered kernel": that is the point
            warnings.simplefilter("ignore")
            for op, key, dotted in _computing_kernels(tuple(dotted_names)):
                lib.impl(op, functools.partial(_refused_kernel, dotted, reason), key)
        yield
    finally:
        _NO_NEW_PROCESSES.pop()
        lib._destroy()


# a forbidden operator in another process is out of the dispatcher's reach: while a test forbids one, no process
# may start (an audit hook, which Python never removes) and none may be running already (/proc); while the grader
# measures a call, the same hook notes every process started (processes_started)
_NO_NEW_PROCESSES = []
_PROCESS_LOGS = []
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec",
                   "os.spawn", "os.startfile", "pty.spawn"}
_PROCESS_GUARD = []


def _install_process_guard():
    if _PROCESS_GUARD:
        return

    def on_a_new_process(event, args):
        if event not in _PROCESS_EVENTS:
            return
        for log in _PROCESS_LOGS:
            log.append(event)
        if _NO_NEW_PROCESSES:
            raise _refuse(_NO_NEW_PROCESSES[-1], f"no process may start while a test forbids an operator ({event})")

    sys.addaudithook(on_a_new_process)
    _PROCESS_GUARD.append(on_a_new_process)


@contextlib.contextmanager
def processes_started():
    """Yields a list that gets the audit event of each process this process starts while the block runs
    ("subprocess.Popen", "os.fork", ...), and, as the block begins, "running" if a child is alive already."""
    _install_process_guard()
    log = ["running"] if _child_processes() else []
    _PROCESS_LOGS.append(log)
    try:
        yield log
    finally:
        _PROCESS_LOGS.remove(log)


def _child_processes():
    """The ids of the living processes that could compute for this one (Linux; an empty list where /proc cannot
    tell): in the grading sandbox's PID namespace, every process in it but this one and its ancestors, so a
    process orphaned by an intermediate that exited at once counts too; elsewhere this process's descendants."""
    import os
    try:  # the grading sandbox: a PID namespace whose init is bubblewrap's (another uid's process: not the student's)
        with open("/proc/1/cmdline", "rb") as f:
            own_namespace = os.path.basename(f.read().split(b"\0")[0]) == b"bwrap"
    except OSError:
        own_namespace = False
    if own_namespace:
        ancestors, pid = set(), os.getpid()
        while pid > 0 and pid not in ancestors:
            ancestors.add(pid)
            pid = _parent(pid)
        return [pid for pid in _pids() if pid not in ancestors and _alive(pid)]
    found, todo = [], [os.getpid()]
    while todo:
        parent = todo.pop()
        for thread in _listdir(f"/proc/{parent}/task"):
            try:
                with open(f"/proc/{parent}/task/{thread}/children") as f:
                    children = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                continue
            new = [child for child in children if child not in found]
            found += new
            todo += new
    return [pid for pid in found if _alive(pid)]


def _listdir(path):
    import os
    try:
        return os.listdir(path)
    except OSError:
        return []


def _pids():
    return [int(p) for p in _listdir("/proc") if p.isdigit()]


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has finished
    except (OSError, IndexError):
        return False


def _refused_kernel(dotted, reason, *args, **kwargs):
    raise _refuse(dotted, reason)


@functools.lru_cache(maxsize=64)
def _computing_kernels(dotted_names):
    """[(aten operator with overload, dispatch key, the forbidden name)] for every kernel that computes one of them."""
    shorts = {d.rsplit(".", 1)[-1]: d for d in dotted_names}
    found = []
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        op = full[len("aten::"):]
        dotted = next((d for s, d in shorts.items() if _kernel_name_matches(op.split(".")[0], s)), None)
        if dotted is not None:
            found += [(op, key, dotted) for key in _COMPUTING_KEYS
                      if torch._C._dispatch_has_kernel_for_dispatch_key(full, key)]
    return found


# What a launcher may do in PyTorch around its Triton kernels: make tensors, view them, copy or convert them.
# Every other aten operator computes, and where an exercise asks a kernel to compute, it is refused.
LAUNCHER_OPS = frozenset("""empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
    ones_like new_ones full full_like new_full fill_ zero_ scalar_tensor view _unsafe_view reshape _reshape_alias
    as_strided expand expand_as permute transpose t unsqueeze squeeze select slice narrow split split_with_sizes unbind
    chunk alias detach lift lift_fresh view_as flatten unflatten movedim clone contiguous copy_ _to_copy to
    _copy_from _copy_from_and_resize resize_ set_ _local_scalar_dense is_nonzero""".split())

_LAUNCHER_ONLY = []  # the operators each enclosing `launcher_only` block allows besides LAUNCHER_OPS


@contextlib.contextmanager
def launcher_only(*also):
    """While the block runs, the student's code may run only the PyTorch operators a launcher needs (allocate,
    view, copy, convert: LAUNCHER_OPS) and the aten operators named in `also` ("mul", "sum", ...); any other
    raises ForbiddenCall. So where an exercise asks a Triton kernel to compute, a result computed in PyTorch
    around a kernel that only copies is refused, whatever the kernel loads and stores. The grader sends the
    allow-list with its calls, like forbid's names; in this process it applies to this thread."""
    _LAUNCHER_ONLY.append(tuple(also))
    try:
        with allowed_ops(*also):
            yield
    finally:
        _LAUNCHER_ONLY.pop()


def launcher_only_now():
    """None outside every `launcher_only` block; inside, the operators allowed besides LAUNCHER_OPS (every block's)."""
    return tuple(name for names in _LAUNCHER_ONLY for name in names) if _LAUNCHER_ONLY else None


@contextlib.contextmanager
def allowed_ops(*also, reason="this exercise asks your Triton kernel to compute it; a launcher only allocates, "
                               "views and copies tensors and launches kernels"):
    """Refuse every aten operator but LAUNCHER_OPS and `also`, by what runs (a dispatch mode: any alias, any path)."""
    from .modes import EagerDispatchMode
    allowed = LAUNCHER_OPS | set(also)

    class AllowOnly(EagerDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = getattr(getattr(func, "overloadpacket", func), "__name__", "")
            if name not in allowed:
                raise _refuse(f"torch.ops.aten.{name}", reason)
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
    _FORBIDDEN.append(tuple(dotted_names))
    try:
        with forbidden_ops(*dotted_names, reason=reason):
            yield
    finally:
        _FORBIDDEN.pop()


# ------------------------------------------------------------ gradients

def _detached(value):
    if isinstance(value, torch.Tensor):
        return torch.Tensor.detach(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value) if type(value) in (tuple, list) else tuple(_detached(v) for v in value)
    return value


def local_call_with_grads(fn, *args, grad_output=None, **kwargs):
    """See call_with_grads; runs here, in this process."""
    inputs = [torch.Tensor.detach(a).clone().requires_grad_(True)
              if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    params = dict(owner.named_parameters()) if isinstance(owner, torch.nn.Module) else {}
    for p in params.values():
        p.grad = None
    with torch.enable_grad():
        out = fn(*inputs, **kwargs)
        first = out[0] if isinstance(out, (tuple, list)) and out else out
        if not isinstance(first, torch.Tensor):
            raise AssertionError(f"expected a tensor output to differentiate, got {type(first).__name__}")
        if not first.requires_grad:
            raise AssertionError("the output does not depend on the inputs or parameters through autograd: "
                                 "was it detached, turned into numpy, or computed under torch.no_grad()?")
        g = torch.ones_like(first) if grad_output is None else torch.as_tensor(grad_output).to(first)
        if g.shape != first.shape:
            raise AssertionError(f"the output has shape {tuple(first.shape)}, the gradient the test sends back "
                                 f"{tuple(g.shape)}: check the output's shape")
        try:  # the gradient of sum(first * g) at first is g, exactly; backward(first, g) would import sympy (0.5 s)
            torch.autograd.backward((first * g).sum())
        except RuntimeError as e:
            raise AssertionError("the backward pass failed (an in-place operation on a tensor autograd needs?): "
                                 + str(e).splitlines()[0][:200]) from None
    input_grads = tuple(x.grad.detach().clone() if isinstance(x, torch.Tensor) and x.requires_grad
                        and x.grad is not None else None for x in inputs)
    param_grads = {n: (p.grad.detach().clone() if p.grad is not None else None) for n, p in params.items()}
    return _detached(out), input_grads, param_grads


def call_with_grads(fn, *args, grad_output=None, **kwargs):
    """Run `fn(*args, **kwargs)` and a backward pass; return (output, input_grads, param_grads).

    output: what fn returned, detached. The backward pass starts from its first tensor (the
    output itself, or element 0 of a tuple) with `grad_output` (default: ones), i.e. it
    differentiates sum(first * grad_output).
    input_grads: one entry per positional argument: the gradient for floating-point tensors, else None.
    param_grads: {name: gradient or None} of fn's parameters when fn (or the object of a bound
    method) is an nn.Module, else {}.
    Use it instead of calling .backward() on a student's output: it works the same whether the
    test runs in the notebook's kernel or on the grader's side.
    """
    remote = getattr(type(fn), "__remote_call_with_grads__", None)
    if remote is not None:
        return remote(fn, args, kwargs, grad_output)
    return local_call_with_grads(fn, *args, grad_output=grad_output, **kwargs)
