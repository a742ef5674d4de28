"""Lending: what a test defines runs here, in the grader's process, and the kernel gets a stand-in.

The request is a plain pickle (never cloudpickle), so a function or class goes only by reference to an
importable module; whatever a test or the grader's set-up defined (a fake model, a reference function, a
lambda), and any method or generator, is *lent*: the kernel gets a stand-in whose every use (a call, a public
attribute, len, items) is a question back to the grader, asked over Jupyter's stdin channel while the request
runs, and answered here (`Lender.answer_callback`) with data or another lent object. A lent object lives for
one request: kept by the student's code, it answers nothing later. It may use the student's objects it is
handed (the session carries those requests), and a lent call inside the student's autograd graph gets its
backward pass here too (a "vjp" question). A Triton launch the kernel makes while a test counts work is a
question too: run in the grader's meter (meter.py)."""
import base64
import contextlib
import io
import json
import pickle
import time
import types

import dataclasses

from .codec import Remote, decode, handle_id
from .wire import CALLBACK_ERRORS, CALLBACK_OPS, LENT_CALL_MEMORY, MAX_ESCAPED_CHARS, TEST_MODULE, GraderSideError


@contextlib.contextmanager
def bounded_memory(extra):
    """While a lent object runs at the kernel's request (with arguments the kernel chose: a cache of
    10**9 rows), this process may map at most `extra` more bytes; past it the call raises MemoryError
    or torch's RuntimeError, which the kernel receives as its own error. Linux's RLIMIT_DATA, soft limit only."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmData:"))
        limit = used + extra if hard == resource.RLIM_INFINITY else min(used + extra, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ImportError, OSError, ValueError, StopIteration):  # not Linux: unbounded, as before
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


class LendThis:
    """Marks an answer that a pickle cannot carry (a lent object's odd result): it is lent instead."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def stays_here(obj):
    """True for what the grader lends instead of sending: test-made code and objects, methods, generators."""
    if isinstance(obj, (types.FunctionType, type)):
        return obj.__module__ == TEST_MODULE or "<" in obj.__qualname__  # (a lambda, a function made in a function)
    if isinstance(obj, (types.MethodType, types.GeneratorType, types.CodeType, types.FrameType, types.ModuleType)):
        return True
    return type(obj).__module__ == TEST_MODULE


def no_modes():
    """Every torch function and dispatch mode off the stacks while the block runs (course_utils' one helper)."""
    from course_utils.charged_once import torch_modes_off
    return torch_modes_off()


def vjp(fn, args, kwargs, grad_outputs):
    """Gradients of sum(fn(args, kwargs) * grad_outputs) at each floating-point tensor argument (None at
    the others), positional arguments first, then keyword ones in their order: a lent function's
    backward pass, for the student's graph that called it."""
    import torch
    keys = list(kwargs)
    leaves = [torch.Tensor.detach(v).clone().requires_grad_(True)
              if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in args + list(kwargs.values())]
    with torch.enable_grad():
        out = fn(*leaves[:len(args)], **dict(zip(keys, leaves[len(args):])))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    pairs = [(o, g) for o, g in zip(outs, grad_outputs)
             if isinstance(o, torch.Tensor) and o.requires_grad and isinstance(g, torch.Tensor) and g.shape == o.shape]
    wanted = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    if not pairs or not wanted:
        return [None] * len(leaves)
    with torch.enable_grad():  # (asked during the student's backward pass, where grad mode is off)
        # the sum itself, not autograd.grad(outputs, wanted, grad_outputs): that form imports sympy (0.5 s) on first use
        total = sum((o * g.to(o.dtype)).sum() for o, g in pairs)
    grads = iter(torch.autograd.grad(total, wanted, allow_unused=True))
    return [next(grads) if isinstance(t, torch.Tensor) and t.requires_grad else None for t in leaves]


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """What the grader's side of one direct call met while the kernel ran it (Lender.call_record)."""
    launched: list          # the values each Triton launch of the call stored (one array per launch)
    refusal: str | None     # why the grader's meter refused to run a launch
    timeout: Exception | None  # a launch that ran past the cell's time limit
    grader_failure: GraderSideError | None  # the grader could not answer a question: the call is the grader's


class Lender:
    """What a Session lends: objects lent to the request under way, and the kernel's questions about them.

    ask(op, id, args, kwargs, label): the session's request, made by the handles a question's arguments carry."""

    def __init__(self, ask, meter=None, deadline=None):
        self.ask = ask
        self.meter = meter  # meter.Meter: where the kernel's Triton launches run while a test counts them
        self.deadline = deadline  # () -> the monotonic time by which the running test cell must end (or None)
        self._work_meters, self._launched, self._launch_refusal, self._launch_timeout = (), None, None, None
        self._call_inputs, self._known_values = ((), {}), None  # the direct call's arguments; values a launch may load
        self.lent = {}  # {id: object} lent to the kernel for the request under way (ids never reused)
        self._next_id = 0
        self._conversations = []  # converse functions of the kernel's questions under way, innermost last
        self._grader_failure = None

    def begin_call(self, args, kwargs, work_meters):
        """A direct call starts: its arguments (values a launch may load) and the test's open count_work blocks."""
        self._call_inputs, self._known_values = (args, kwargs), None
        self._grader_failure, self._launch_refusal, self._launch_timeout, self._launched = None, None, None, []
        self._work_meters = work_meters

    def call_record(self):
        return CallRecord(self._launched, self._launch_refusal, self._launch_timeout, self._grader_failure)

    def conversing(self):
        """converse(reply) -> the kernel's next prompt, of the innermost question under way; None outside one."""
        return self._conversations[-1] if self._conversations else None

    def end_request(self):
        """Lent for one request: a kept stand-in answers nothing later."""
        self.lent.clear()

    def pickle(self, value):
        """`value` as a plain pickle: Remote handles by id, test-made objects lent (see the module docstring)."""
        session = self

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj):
                if type(obj) is Remote:
                    return ("h", handle_id(obj))
                if type(obj) is LendThis:
                    obj = obj.value
                elif not stays_here(obj):
                    return None
                label = getattr(obj, "__qualname__", None)
                return ("g", session._lend(obj), (label if type(label) is str else type(obj).__qualname__)[:60])

        out = io.BytesIO()
        Pickler(out, protocol=4).dump(value)
        return out.getvalue()

    def _lend(self, obj):
        self._next_id += 1
        self.lent[self._next_id] = obj
        return self._next_id

    def answer_callback(self, text, converse=None):
        """The kernel's question about a lent object (JSON text): the reply, base64 of a pickle
        ("ok", value) or ("error", kind). The object runs here, as the test's own code; if it uses
        the student's objects, `converse(reply) -> the kernel's next prompt` carries those requests."""
        self._conversations.append(converse or self._no_conversation)
        try:
            try:
                with no_modes(), bounded_memory(LENT_CALL_MEMORY):  # (in this process's transport, the
                    value = ("ok", self._callback(text))               # kernel side's modes are on the stack)
            except GraderSideError as e:  # not the student's doing: the request fails as the grader's (see _ask)
                self._grader_failure = self._grader_failure or e
                value = ("error", "RuntimeError")
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001: the kernel's call failed: its kind goes back, no message
                value = ("error", next((k.__name__ for k in type(e).__mro__ if k.__name__ in CALLBACK_ERRORS),
                                       "RuntimeError"))
            try:
                reply = self.pickle(value)
            except Exception:  # noqa: BLE001: an answer pickle cannot carry: lend it instead
                reply = self.pickle(("ok", LendThis(value[1])))
            return base64.b64encode(reply).decode()
        finally:
            self._conversations.pop()

    @staticmethod
    def _no_conversation(reply):
        raise GraderSideError("a test's object used the student's kernel, over a transport that cannot carry it")

    def _callback(self, text):
        if not isinstance(text, str) or len(text) > MAX_ESCAPED_CHARS:
            raise ValueError("a question too large")
        question = json.loads(text)
        op, number = question["op"], int(question.get("id", 0))
        if op == "launch":
            return self._launch(question)
        if op not in CALLBACK_OPS or number not in self.lent:
            raise TypeError("not a question about an object lent to this call")
        target = self.lent[number]
        args = decode(question.get("args"), self.lent, self.ask, "argument", callback=True)
        kwargs = decode(question.get("kwargs"), self.lent, self.ask, "argument", callback=True)
        if type(args) is not list or type(kwargs) is not dict:
            raise TypeError("malformed arguments")
        if op == "call":
            return target(*args, **kwargs)
        if op == "vjp":  # args: (call args, call kwargs, gradients at the outputs)
            if len(args) != 3 or type(args[0]) is not list or type(args[1]) is not dict or type(args[2]) is not list:
                raise TypeError("malformed arguments")
            return vjp(target, *args)
        if op == "getattr":
            name = args[0] if args else None
            if type(name) is not str or name.startswith("_"):  # never __dict__, __code__, __globals__, _parameters
                raise AttributeError("a test's object shows only its public attributes")
            return getattr(target, name)
        if op == "getitem":
            return target[args[0]]
        return {"len": len, "list": list, "bool": bool, "next": next}[op](target)

    def _launch(self, question):
        """A Triton kernel launch the kernel's code made while a test counts work: run in the grader's meter, its
        work added to the test's open count_work blocks; the reply is {storage index: bytes} the launch wrote."""
        if self.meter is None or not self._work_meters:
            raise TypeError("a kernel launch where no test counts one")
        from .meter import LAUNCH_SECONDS, Timeout
        seconds = self.deadline() - time.monotonic() if self.deadline is not None else LAUNCH_SECONDS
        try:
            reply = self.meter.launch(question, seconds)
        except Timeout as e:
            self._launch_timeout = e
            raise RuntimeError("the kernel ran past the cell's time limit") from None
        except RuntimeError as e:
            raise GraderSideError(str(e)) from None
        if "refused" in reply:
            self._launch_refusal = reply["refused"]
            raise TypeError("a kernel the grader cannot run")
        if "error" in reply:
            raise RuntimeError("the kernel failed")
        reply["work"]["foreign_values"] = self._foreign(reply["loaded"])
        for meter in self._work_meters:
            meter.absorb(reply["work"])
        self._launched.append(reply["stored"])
        return reply["storages"]

    def _foreign(self, loaded):
        """How many distinct values a launch loaded are foreign to the call, and not counted by an earlier launch of
        it: neither the call's inputs (as given, or cast to another float dtype, as a launcher may), nor values an
        earlier launch of the call stored, nor 0 or +-inf (a buffer filled with a constant). A result computed
        outside the kernels (numpy, an interpreter run the meter never saw) and carried into the output by a kernel
        that copies it is foreign."""
        import numpy as np
        import torch
        if self._known_values is None:
            found = [np.array([0.0, np.inf, -np.inf])]
            for item in float_tensors(self._call_inputs):
                found += [item.detach().to(dtype).double().numpy().ravel() for dtype in
                          {item.dtype, torch.float64, torch.float32, torch.float16, torch.bfloat16}]
            self._known_values = np.unique(np.concatenate(found))
        loaded = loaded[~np.isnan(loaded)]
        foreign = loaded[~np.isin(loaded, np.concatenate([self._known_values, *self._launched]))]
        self._known_values = np.union1d(self._known_values, foreign)  # (counted once a call: D loaded by two kernels)
        return int(foreign.size)


def float_tensors(value):
    """The floating-point tensors in `value`, found through tuples, lists and dict values (a call's arguments or
    what it returned)."""
    from course_utils.memory import tensors_in
    return [tensor for tensor in tensors_in(value) if tensor.is_floating_point()]
