"""Charged once: a test's correct earlier parts standing in for the student's, so a mistake costs its own points.

`standing_in` / `stand_in` rebind the notebook's names (in grading, the parts are carried to the student's
kernel with each call, lent); `in_place_allowed` lets a replayed part change its inputs; `charged` tells a
replay whether the earlier exercise's own test already charged a mistake; `call_with_grads` runs a forward
and backward pass the same way in a notebook and on the grader's side. Open blocks are in ambient.AMBIENT."""
import contextlib
import functools
import sys

import torch

from .ambient import AMBIENT


def record_verdicts(verdicts):
    """The grader's test runner starts a notebook's record (an empty dict)."""
    AMBIENT.verdicts.clear()
    AMBIENT.verdicts.update(verdicts)


def record_verdict(grade_id, passed):
    AMBIENT.verdicts[grade_id] = bool(passed)


def charged(grade_id):
    """Whether the mistake a replay would blame on an earlier exercise was charged there: False when the grader
    ran that exercise's test cell and it passed. A test that replays the student's own earlier part (to charge a
    mistake once) may excuse a difference only when this is True; a helper right in its own test and wrong in the
    replay (a stateful helper) then excuses nothing. True where no grader is running (a student's own notebook)."""
    return AMBIENT.verdicts.get(grade_id) is not True


@contextlib.contextmanager
def in_place_allowed():
    """Inside, a student's function may change the tensors and arrays it is given, as in their notebook.

    In grading, the student's code gets copies of a test's tensors, and a call that changes one in
    place fails the test; a test that replays the student's own pieces (to charge a mistake once)
    wraps those calls in this block, and the changes are then copied back into the test's tensors.
    Outside grading it changes nothing.
    """
    AMBIENT.in_place.append(True)
    try:
        yield
    finally:
        AMBIENT.in_place.pop()


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
    namespace = notebook_namespace()
    saved = {name: namespace.get(name, _MISSING) for name in parts} if namespace is not None else {}
    AMBIENT.stand_ins.append(dict(parts))
    try:
        if namespace is not None:
            namespace.update({name: _as_the_grader_runs_it(part) for name, part in parts.items()})
        yield
    finally:
        AMBIENT.stand_ins.pop()
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
    code, run beside a test's refusals and meters: autograder/kernel/lending.py's lent objects, a stand-in in a notebook)."""
    from torch.utils._python_dispatch import _disable_current_modes
    popped = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        with _disable_current_modes():
            yield
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


_MISSING = object()


def stand_in(**parts):
    """`standing_in(**parts)` for the rest of the running test cell, visible part included.

    A test of a later exercise calls it in a hidden block at its top, so that a mistake in an
    earlier exercise (even one that raises) is charged to that exercise only. The grader ends
    it after the cell (end_cell); in a notebook it ends when the cell has run.
    """
    block = standing_in(**parts)
    block.__enter__()
    AMBIENT.cell_stand_ins.append(block)
    shell = _shell()
    if shell is not None and len(AMBIENT.cell_stand_ins) == 1:
        def after_cell(*_):
            shell.events.unregister("post_run_cell", after_cell)
            end_cell()
        shell.events.register("post_run_cell", after_cell)


def end_cell():
    """Close every `stand_in` of the cell that ran: the notebook's own names mean the student's parts again."""
    while AMBIENT.cell_stand_ins:
        AMBIENT.cell_stand_ins.pop().__exit__(None, None, None)


def _shell():
    """The running IPython shell, or None outside a kernel (the grader's process has none)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def notebook_namespace():
    """The running notebook's global namespace (IPython's user namespace), or None outside a kernel."""
    return getattr(_shell(), "user_ns", None)


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
