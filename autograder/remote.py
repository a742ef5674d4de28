"""The grader's channel into a student's kernel: handles on kernel objects, and data back.

verdicts.py runs a test cell on the grader's side; every time the test touches a student
object it goes through a Session: a request (a pickle made here: arguments by value, `Remote`
handles by id) answered by kernel_rpc.py in the kernel, whose answer is JSON holding only plain
data (numbers, strings, tensors and arrays as raw bytes, containers of these) or ids of objects
that stay in the kernel. Answers are decoded strictly here (allow-listed dtypes, shapes that
match their bytes, bounded sizes); anything else is a GraderSideError, never data.

Code never travels into the kernel. The request is a plain pickle (never cloudpickle), so a
function or class goes only by reference to an importable module; whatever a test or the
grader's set-up defined (a fake model, a reference function, a lambda), and any method or
generator, is *lent*: the kernel gets a stand-in whose every use (a call, a public attribute,
len, items) is a question back to the grader, asked over Jupyter's stdin channel while the
request runs, and answered here with data or another lent object. A lent object lives for one
request: kept by the student's code, it answers nothing later. A lent object may use the student's
objects it is handed (a request made during a question travels as its answer, and the kernel asks
again with that request's answer), and a lent call inside the student's autograd graph gets its
backward pass here too (a "vjp" question). That is how a test's correct parts stand in for the
student's earlier answers (course_utils.stand_in; the request carries them).

The transport is a function `(bytes, answer_callback) -> answer text`, over a Jupyter kernel
(kernel_transport) in grading, or in this process (in_process_transport) for tests and
`verdicts check`; it calls answer_callback(question, converse) for each question, where
converse(reply) sends a reply and returns the kernel's next prompt.
"""
import ast
import base64
import builtins
import contextlib
import dataclasses
import importlib.util
import io
import json
import marshal
import math
import pickle
import re
import time
import types
from pathlib import Path

import numpy as np

from . import kernel_rpc

DTYPES = {"float16", "float32", "float64", "float96", "float128", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool", "complex64", "complex128", "complex192", "complex256"}  # numpy's, every precision
TORCH_ONLY = {"bfloat16"}
STUB = (Path(__file__).with_name("kernel_rpc.py")).read_text()
MAX_ANSWER_CHARS = kernel_rpc.MAX_ANSWER_BYTES  # the kernel's own cap, the one limit on an answer
MAX_DIMS = 64
MAX_NODES = 200_000  # values in one answer (the kernel's encode refuses more, as an answer too large)
TEST_MODULE = "__grader_test__"  # the module name of every test cell's and grader-setup cell's definitions
LENT_CALL_MEMORY = 2**30  # bytes a lent object may add to the grader's process while the kernel's call runs it
CALLBACK_OPS = {"call", "vjp", "getattr", "len", "list", "getitem", "bool", "next"}
_BUILTIN_ERRORS = {name: getattr(builtins, name) for name in
                   "ArithmeticError AssertionError AttributeError IndexError KeyError LookupError NameError "
                   "NotImplementedError OverflowError RecursionError RuntimeError TypeError "
                   "ValueError ZeroDivisionError MemoryError".split()}


class GraderSideError(BaseException):
    """The grader could not ask the kernel (no answer, a malformed answer): never the student's verdict.

    A BaseException, so that a test's own `except Exception` (a fallback for an answer that raises)
    cannot take it for the student's error: it ends the test cell, which is flagged for review."""


# ------------------------------------------------------------------ handles on kernel objects

class Remote:
    """A handle on an object that stays in the student's kernel."""
    __slots__ = ("_session", "_id", "_label")

    def __init__(self, session, number, label):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_id", number)
        object.__setattr__(self, "_label", label)

    def _ask(self, op, args=(), kwargs=None, label=None):
        return self._session.ask(op, self._id, args, kwargs or {}, label or self._label)

    def __call__(self, *args, **kwargs):
        return self._ask("call", args, kwargs, f"{self._label}(...)")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # numpy and friends probe for __array__ & co: never the kernel's business
        return self._ask("getattr", (name,), label=f"{self._label}.{name}")

    def __setattr__(self, name, value):
        self._ask("setattr", (name, value), label=f"{self._label}.{name}")

    def __len__(self):
        return self._ask("len", label=f"len({self._label})")

    def __iter__(self):
        return iter(self._ask("list", label=f"list({self._label})"))

    def __getitem__(self, key):
        return self._ask("getitem", (key,), label=f"{self._label}[...]")

    def __bool__(self):
        return self._ask("bool", label=f"bool({self._label})")

    def __repr__(self):
        return f"<student object {self._label}>"

    def __reduce__(self):
        raise TypeError("a Remote handle is sent by id, through the session's pickler only")

    def __remote_call_with_grads__(self, args, kwargs, grad_output):
        return self._ask("grads", (tuple(args), dict(kwargs), grad_output), label=f"{self._label}(...) backward")


def _copy_back(original, changed):
    """Mirror an in-place change the student's code made to a tensor or array argument (cu.in_place_allowed)."""
    import torch
    if isinstance(original, torch.Tensor) and isinstance(changed, torch.Tensor):
        if original.shape == changed.shape and original.dtype == changed.dtype:
            with torch.no_grad(), contextlib.suppress(RuntimeError):  # (an expanded view cannot be written)
                original.copy_(changed)
    elif type(original) is np.ndarray and type(changed) is np.ndarray:
        if original.shape == changed.shape and original.dtype == changed.dtype and original.flags.writeable:
            np.copyto(original, changed)


# ------------------------------------------------------------------ the conversation with the kernel

_CALLBACK_ERRORS = set(_BUILTIN_ERRORS) | {"StopIteration"}


@contextlib.contextmanager
def _bounded_memory(extra):
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


class _LendThis:
    """Marks an answer that a pickle cannot carry (a lent object's odd result): it is lent instead."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _stays_here(obj):
    """True for what the grader lends instead of sending: test-made code and objects, methods, generators."""
    if isinstance(obj, (types.FunctionType, type)):
        return obj.__module__ == TEST_MODULE or "<" in obj.__qualname__  # (a lambda, a function made in a function)
    if isinstance(obj, (types.MethodType, types.GeneratorType, types.CodeType, types.FrameType, types.ModuleType)):
        return True
    return type(obj).__module__ == TEST_MODULE


class UnreadableAnswer(GraderSideError):
    """An answer the grader cannot read as data (malformed, forged, past a budget): every decoding failure."""


COURSE_MODULES = {"builtins", "copyreg", "_codecs", "collections", "functools", "math", "torch", "numpy",
                  "course_utils"}  # what every kernel of the course can import: a request refers to nothing else


class _CourseOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] not in COURSE_MODULES:
            raise pickle.UnpicklingError(f"{module}.{name} is not among the modules every kernel of the course has")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return None


def _readable_in_any_course_kernel(payload):
    """Read the request as the kernel will, refusing any module outside COURSE_MODULES: the grader's own check
    that a kernel which says it cannot read a request has had something replaced (never the grader's failure)."""
    _CourseOnly(io.BytesIO(payload)).load()


def _decode(value, session, label, callback=False):
    """A kernel answer as plain values built here; anything unexpected is an UnreadableAnswer (a GraderSideError),
    whatever went wrong while reading it, within a budget of MAX_NODES values.

    callback: these are the arguments of the kernel's call on a lent object (they may hold lent objects,
    and handles, which the lent object may use: the kernel answers while it waits)."""
    budget = [MAX_NODES]
    try:
        return _decode_value(value, session, label, 0, callback, budget)
    except (GraderSideError, _NotLent):
        raise
    except Exception as e:  # noqa: BLE001: a value the rules above did not foresee is still not data
        raise UnreadableAnswer(f"an unreadable answer ({type(e).__name__})") from None


class _NotLent(TypeError):
    """A question's arguments name an object the test did not lend to this call: the kernel's error, not ours."""


def _decode_array(value, kind):
    """A tensor, an array or a numpy scalar, from its dtype, shape and bytes (each checked against the others)."""
    import torch
    dtype = str(value["dtype"])
    if dtype not in DTYPES:
        raise UnreadableAnswer(f"unexpected dtype {dtype!r}")
    raw = base64.b64decode(str(value["b64"]), validate=True)
    shape = [] if kind == "npscalar" else [int(s) for s in value["shape"]][:MAX_DIMS + 1]
    if len(shape) > MAX_DIMS or any(s < 0 for s in shape) or math.prod(shape) * np.dtype(dtype).itemsize != len(raw):
        raise UnreadableAnswer("an array's shape does not match its bytes")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if kind == "npscalar":
        return array[()]
    if kind == "ndarray":
        return array
    tensor = torch.from_numpy(array)
    original = str(value.get("as", dtype))
    if original != dtype:
        if original not in DTYPES | TORCH_ONLY:
            raise UnreadableAnswer(f"unexpected dtype {original!r}")
        tensor = tensor.to(getattr(torch, original))
    return tensor


def _decode_torch_name(value, kind):
    """A torch.dtype or torch.device, from an allow-listed name."""
    import torch
    name = str(value["v"])
    if kind == "dtype":
        if name not in DTYPES | TORCH_ONLY:
            raise UnreadableAnswer(f"unexpected dtype {name!r}")
        return getattr(torch, name)
    if not re.fullmatch(r"(cpu|cuda|mps|xpu|meta)(:\d{1,3})?", name):
        raise UnreadableAnswer(f"unexpected device {name[:40]!r}")
    return torch.device(name)


def _decode_value(value, session, label, depth, callback, budget):
    budget[0] -= 1
    if budget[0] < 0:
        raise UnreadableAnswer(f"an answer of more than {MAX_NODES} values")
    if depth > 25:
        raise UnreadableAnswer("answer nested too deeply")
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is not dict or "t" not in value:
        raise UnreadableAnswer(f"malformed answer {type(value).__name__}")
    kind = value["t"]
    if kind == "none":
        return None
    if kind == "int":
        digits = str(value["v"])
        if len(digits) > 4300:  # Python's own limit on reading an int from text
            raise UnreadableAnswer("an int of more than 4300 digits")
        return int(digits)
    if kind == "float":
        return float(str(value["v"])[:100])
    if kind in ("tensor", "ndarray", "npscalar"):
        return _decode_array(value, kind)
    if kind in ("dtype", "device"):
        return _decode_torch_name(value, kind)
    if kind == "slice":
        parts = [_decode_value(v, session, label, depth + 1, callback, budget) for v in value["items"]]
        if len(parts) != 3 or any(p is not None and type(p) is not int for p in parts):
            raise UnreadableAnswer("a malformed slice")
        return slice(*parts)
    if kind in ("tuple", "list"):
        items = [_decode_value(v, session, f"{label}[{i}]", depth + 1, callback, budget) for i, v in enumerate(value["items"])]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        out = {}
        for k, v in value["items"]:
            key = _decode_value(k, session, label, depth + 1, callback, budget)
            if type(key) not in (str, int):
                raise UnreadableAnswer("a dict key that is not a str or int")
            out[key] = _decode_value(v, session, f"{label}[{key!r}]", depth + 1, callback, budget)
        return out
    if kind == "handle":
        return Remote(session, int(value["id"]), label)
    if kind == "lent":  # the test's own object, lent to this request, coming back (model.eval() returns self)
        number = int(value["id"])
        if number not in session.lent:
            if callback:
                raise _NotLent("an object the test did not lend to this call")
            raise UnreadableAnswer("an answer naming an object the test did not lend")
        return session.lent[number]
    raise UnreadableAnswer(f"unknown answer kind {kind!r}")


def _no_modes():
    """Every torch function and dispatch mode off the stacks while the block runs (course_utils' one helper)."""
    from course_utils.checks import torch_modes_off
    return torch_modes_off()


@dataclasses.dataclass
class _Request:
    """One call to the kernel as the test's side sent it."""
    op: str
    target: object
    forbidden: tuple                  # operators the exercise forbids (cu.forbid)
    in_place: bool                    # the test replays the student's pieces: changes to inputs are mirrored
    only: tuple | None                # launcher_only: the PyTorch the launcher may use besides kernels
    meters: dict                      # {"memory": open TensorMemory blocks, "work": open count_work blocks}
    direct: bool = False              # sent by the session's own transport (not a lent object's nested question)
    outside: bool = False             # the call's memory is read from the kernel's cgroup
    watched: bool = False             # other processes in the kernel's cgroup are looked for
    payload: bytes = b""


class Session:
    """One kernel's conversation: `transport(bytes, answer_callback) -> answer text`."""

    def __init__(self, transport, meter=None, deadline=None, cgroup=None):
        self.transport = transport
        self.cgroup = cgroup  # sandbox.KernelCgroup: the kernel's processes and resident memory, read from outside
        self.meter = meter  # kernel_meter.Meter: where the kernel's Triton launches run while a test counts them
        self.deadline = deadline  # () -> the monotonic time by which the running test cell must end (or None)
        self._work_meters, self._launched, self._launch_refusal, self._launch_timeout = (), None, None, None
        self.lent = {}  # {id: object} lent to the kernel for the request under way (ids never reused)
        self._next_id = 0
        self._conversations = []  # converse functions of the kernel's questions under way, innermost last
        self._grader_failure = None
        self.notes = []  # what a reviewer should see about the answers (work a measurement could not see)

    def take_notes(self):
        """The notes made since the last call, for the caller to flag (job.event "integrity")."""
        notes, self.notes = self.notes, []
        return notes

    def ask(self, op, target, args, kwargs, label):
        if self._conversations:  # a lent object uses the student's objects while the kernel waits for it
            return self._ask(op, target, args, kwargs, label, self._nested_transport)
        with _no_modes():  # the test's own modes (forbid, TensorMemory) are sent with the request, for the kernel's work
            try:
                return self._ask(op, target, args, kwargs, label, self.transport)
            finally:
                self.lent.clear()  # lent for one request: a kept stand-in answers nothing later

    def _nested_transport(self, payload, answer_callback):
        """A request made while the kernel waits for the answer to its question: sent as that answer
        ("request", payload); the kernel serves it and asks again with {"op": "answer", "text": ...},
        asking its own questions about lent objects first if the request needs them."""
        converse = self._conversations[-1]
        prompt = converse(base64.b64encode(pickle.dumps(("request", payload), protocol=4)).decode())
        while True:
            try:
                question = json.loads(prompt) if isinstance(prompt, str) and len(prompt) <= 2 * MAX_ANSWER_CHARS else None
            except ValueError:
                question = None
            if type(question) is dict and question.get("op") == "answer":
                return question.get("text")
            prompt = converse(answer_callback(prompt, converse))

    def _pickle(self, value):
        """`value` as a plain pickle: Remote handles by id, test-made objects lent (see the module docstring)."""
        session = self

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj):
                if type(obj) is Remote:
                    return ("h", object.__getattribute__(obj, "_id"))
                if type(obj) is _LendThis:
                    obj = obj.value
                elif not _stays_here(obj):
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
                with _no_modes(), _bounded_memory(LENT_CALL_MEMORY):  # (in this process's transport, the
                    value = ("ok", self._callback(text))               # kernel side's modes are on the stack)
            except GraderSideError as e:  # not the student's doing: the request fails as the grader's (see _ask)
                self._grader_failure = self._grader_failure or e
                value = ("error", "RuntimeError")
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001: the kernel's call failed: its kind goes back, no message
                value = ("error", next((k.__name__ for k in type(e).__mro__ if k.__name__ in _CALLBACK_ERRORS),
                                       "RuntimeError"))
            try:
                reply = self._pickle(value)
            except Exception:  # noqa: BLE001: an answer pickle cannot carry: lend it instead
                reply = self._pickle(("ok", _LendThis(value[1])))
            return base64.b64encode(reply).decode()
        finally:
            self._conversations.pop()

    @staticmethod
    def _no_conversation(reply):
        raise GraderSideError("a test's object used the student's kernel, over a transport that cannot carry it")

    def _callback(self, text):
        if not isinstance(text, str) or len(text) > 2 * MAX_ANSWER_CHARS:
            raise ValueError("a question too large")
        question = json.loads(text)
        op, number = question["op"], int(question.get("id", 0))
        if op == "launch":
            return self._launch(question)
        if op not in CALLBACK_OPS or number not in self.lent:
            raise TypeError("not a question about an object lent to this call")
        target = self.lent[number]
        args = _decode(question.get("args"), self, "argument", callback=True)
        kwargs = _decode(question.get("kwargs"), self, "argument", callback=True)
        if type(args) is not list or type(kwargs) is not dict:
            raise TypeError("malformed arguments")
        if op == "call":
            return target(*args, **kwargs)
        if op == "vjp":  # args: (call args, call kwargs, gradients at the outputs)
            if len(args) != 3 or type(args[0]) is not list or type(args[1]) is not dict or type(args[2]) is not list:
                raise TypeError("malformed arguments")
            return _vjp(target, *args)
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
        from .kernel_meter import LAUNCH_SECONDS, Timeout
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
        for meter in self._work_meters:
            meter.absorb(reply["work"])
        self._launched.append(reply["stored"])
        return reply["storages"]

    def _ask(self, op, target, args, kwargs, label, transport):
        request = self._request(op, target, args, kwargs, transport)
        text, resident = self._send(request, label, transport)
        answer = self._read(text, label)
        if not answer.get("ok"):
            self._refuse(answer, request, label if op != "get" else target)
        value = _decode(answer.get("value"), self, label)
        if self.meter is not None and request.only is not None and request.meters["work"] and request.direct:
            _from_kernels(value, self._launched, label)
        _absorb(answer, request.meters, resident)
        self._note_unseen(answer, request, label)
        self._mirror_changes(answer, request, args, kwargs, label)
        return value

    def _request(self, op, target, args, kwargs, transport):
        """The pickled request, with the refusals, meters and modes open on the test's side at this call."""
        from course_utils.checks import forbidden_now, in_place_allowed_now, launcher_only_now, stand_ins_now
        from course_utils.kernels import counting
        from course_utils.memory import measuring
        r = _Request(op=op, target=target, forbidden=forbidden_now(), in_place=in_place_allowed_now(),
                     only=launcher_only_now(), meters={"memory": measuring(), "work": counting()},
                     direct=transport is self.transport)
        asked = tuple(kind for kind, open_blocks in r.meters.items() if open_blocks)
        seen = self.cgroup is not None and r.direct  # the kernel's cgroup, read from here
        r.outside = seen and any(m.resident for m in r.meters["memory"])
        asked += ("resident",) * r.outside  # the kernel's cgroup measures the call: no in-kernel watch to inflate it
        r.watched = seen and bool(r.forbidden or r.meters["memory"])
        stand_ins = {name: _LendThis(part) for name, part in stand_ins_now().items()}
        try:
            r.payload = self._pickle((op, target, tuple(args), dict(kwargs), r.forbidden, asked, r.in_place,
                                      stand_ins, r.only))
            _readable_in_any_course_kernel(r.payload)
        except (pickle.PicklingError, TypeError, AttributeError, pickle.UnpicklingError) as e:
            raise GraderSideError(f"the test's arguments could not be sent ({type(e).__name__}: {str(e)[:200]})") from None
        return r

    def _send(self, request, label, transport):
        """(the kernel's answer text, what its cgroup gained during the call or None); raises what the grader's
        side of the call met (a failure of its own, a launch past the cell's limit)."""
        if request.direct:
            self._grader_failure, self._launch_refusal, self._launch_timeout, self._launched = None, None, None, []
            self._work_meters = request.meters["work"]
        if request.watched:
            self._other_processes(label, request.forbidden)
        window = self.cgroup.start() if request.outside else None
        text = transport(request.payload, self.answer_callback)
        resident = self.cgroup.added(window) if window is not None else None
        if request.watched:
            self._other_processes(label, request.forbidden)
        if self._grader_failure is not None:
            raise self._grader_failure
        if self._launch_timeout is not None:
            raise TimeoutError(f"{label}: your Triton kernel did not finish within the cell's time limit")
        return text, resident

    def _read(self, text, label):
        """The answer as a dict; a claim that the kernel could not read the request is the student's."""
        if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
            raise GraderSideError("no answer, or an answer too large")
        try:
            answer = json.loads(text)
        except ValueError:
            raise GraderSideError("an answer that is not JSON") from None
        if type(answer) is not dict:
            raise GraderSideError("an answer that is not a JSON object")
        if "grader" in answer:  # a claim: the grader checked that every kernel of the course can read this request
            self.notes.append(f"the kernel could not read the grader's request for {str(label)[:80]}, which any "
                              "kernel with the course's packages reads: something it needs was replaced")
            raise AssertionError(f"{label}: your kernel could not read the grader's request (something in it that "
                                 "unpickling needs, in torch, numpy or io, was replaced); restart it and leave them alone")
        return answer

    def _refuse(self, answer, request, name):
        """Raise what a failed call means for the test: the student's error, named by kind (never its text)."""
        from course_utils.checks import ForbiddenCall
        kind = str(answer.get("error"))
        if kind == "Tampered":
            self.notes.append(f"while {str(name)[:80]} was asked, the kernel's own Python (its built-ins, "
                              "pickle, binascii or marshal) was not what C made: the request was refused")
            raise AssertionError(f"{name}: the grader's channel into your kernel found Python's own functions "
                                 "replaced (builtins, pickle, binascii or marshal), so no answer of this "
                                 "kernel can be trusted; restart the kernel and leave them alone")
        if self._launch_refusal is not None:
            raise AssertionError(f"{name}: the grader cannot run your kernel as a Triton kernel: "
                                 f"{self._launch_refusal}. A kernel may use tl.*, other @triton.jit functions, "
                                 "constants, and range, min, max, float, int, bool, len, abs, isinstance.")
        if kind == "ForbiddenCall":
            used, forbidden, only = answer.get("forbidden"), request.forbidden, request.only
            if only is not None and type(used) is str and used.startswith("torch.ops.aten.") and used not in forbidden:
                raise ForbiddenCall(f"{name} computed with {used[:80]} in PyTorch, where this exercise asks your "
                                    "Triton kernel to compute: the launcher only allocates, views and copies "
                                    "tensors and launches kernels" + (f" (and may use {', '.join(only)})" if only
                                                                      else "") + ".")
            used = used if used in forbidden else (forbidden[0] if forbidden else "a forbidden operator")
            raise ForbiddenCall(f"{name} called {used}, which this exercise asks you to build yourself.")
        if request.op == "get" and kind == "NameError":
            raise NameError(f"name {request.target!r} is not defined in your notebook: run the cell that defines it, "
                            "and keep the name the exercise gives")
        if kind == "TooLarge":
            raise AssertionError(f"{name} returned more data than the grader accepts")
        error = _BUILTIN_ERRORS.get(kind, RuntimeError)
        hint = " (the exercise is not done yet?)" if kind == "NotImplementedError" else ""
        raise error(f"{name} raised {kind}{hint}; run this test cell in your notebook to see the details")

    def _note_unseen(self, answer, request, label):
        unseen = answer.get("unseen")
        if request.meters["memory"] and type(unseen) is list and unseen:
            what = "; ".join(kernel_rpc.UNSEEN[w] for w in sorted({w for w in unseen if w in kernel_rpc.UNSEEN}))
            self.notes.append(f"while its memory was measured, {label[:80]} {what or 'did unseen work'} (the count "
                              "covers torch calls in the calling thread): check its memory test by hand")

    def _mirror_changes(self, answer, request, args, kwargs, label):
        """Inputs the call changed in place: mirrored where the test replays the student's pieces, else refused."""
        changed = answer.get("changed") or []
        if request.in_place and type(changed) is dict:
            for key, new in changed.items():
                index = int(key) if key.isdigit() else key
                source = args[index] if isinstance(index, int) and index < len(args) else kwargs.get(index)
                _copy_back(source, _decode(new, self, label))
        elif changed:
            names = ", ".join(f"argument {int(k) + 1}" if str(k).isdigit() else f"{str(k)[:40]}="
                              for k in changed[:8] if type(k) is str)
            raise AssertionError(f"{label} changed its input in place ({names}): leave its inputs unchanged "
                                 "(work on a copy, or build a new tensor)")

    def _other_processes(self, label, forbidden):
        """Processes in the kernel's cgroup besides the kernel's own (read here, from outside) could compute what a
        test forbids, or hold memory it measures: refused where an operator is forbidden, else noted for review."""
        from course_utils.checks import ForbiddenCall
        others = self.cgroup.others()
        if not others:
            return
        what = (f"{len(others)} process{'es' * (len(others) > 1)} besides the kernel (started by its code: a server, "
                "a pool or one orphaned by an intermediate)")
        if forbidden:
            raise ForbiddenCall(f"{str(label)[:80]}: while this test ran, your kernel's sandbox held {what}, which "
                                "could compute what the exercise forbids; end them (or do not start them) before the "
                                "test")
        self.notes.append(f"while its memory was measured, {str(label)[:80]} ran beside {what}, whose work the "
                          "count cannot see: check its memory test by hand")

    def fetch(self, name):
        return self.ask("get", name, (), {}, name)


def _absorb(answer, meters, resident=None):
    """Add one call's memory to every open TensorMemory block: the kernel's figures (ints only; anything else in
    the answer is ignored) and `resident`, what the kernel's memory cgroup gained during the call, measured here
    (None: not measured). Triton work is never the kernel's figure: the grader's meter counts it (_launch)."""
    memory = answer.get("memory")
    if not (type(memory) is list and len(memory) == 2 and all(type(x) is int for x in memory)):
        memory = [0, 0]
    for meter in meters["memory"]:
        meter.absorb(*(max(0, x) for x in memory), resident)


def _from_kernels(value, launched, label):
    """AssertionError unless every floating-point value the call returned is one its kernels stored (in the
    grader's meter: `launched`, one array per launch), as stored or cast to the returned dtype: where an exercise
    asks a kernel to compute, a result made anywhere else (PyTorch, numpy, an interpreter the grader never saw)
    holds values no kernel stored. NaN is left to the test's value checks."""
    import torch
    stored = np.unique(np.concatenate(launched)) if launched else np.zeros(0)
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor) and item.is_floating_point() and item.numel():
            found.append(item)
        elif type(item) in (tuple, list):
            stack += list(item)
        elif type(item) is dict:
            stack += list(item.values())
    for tensor in found:
        values = tensor.detach().double().numpy().ravel()
        values = values[~np.isnan(values)]
        candidates = np.union1d(stored, torch.from_numpy(stored).to(tensor.dtype).double().numpy())
        missing = int((~np.isin(values, candidates)).sum())
        if missing:
            raise AssertionError(
                f"{label} returned {missing} of {values.size} values that none of your Triton kernels stored "
                f"({len(launched)} launch(es) ran): in this exercise the result is what your kernel stores, and the "
                "launcher only allocates, views and copies tensors and launches kernels.")


def _vjp(fn, args, kwargs, grad_outputs):
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


def in_process_transport(namespace):
    """A transport that serves requests from a namespace in this process (tests and the mistakes data)."""
    stub = {"__name__": "__autograder_rpc__"}
    exec(compile(STUB, "<kernel_rpc>", "exec"), stub)

    def converse(reply):  # a request made by a lent object: served at once, as the kernel would
        kind, payload = pickle.loads(base64.b64decode(reply))
        return json.dumps({"op": "answer", "text": stub["_serve"](payload, namespace)}) if kind == "request" else None

    return lambda payload, answer_callback: stub["serve"](payload, namespace, lambda q: answer_callback(q, converse))


def kernel_expression(payload):
    """The expression that answers one request in the kernel, sent as a silent execute's user expression.

    An expression, not a cell: the kernel evaluates user expressions with a plain eval, so a request
    skips IPython's cell machinery (input transformers, the AST pass, run hooks), about half of a
    round trip. Its value is the answer's JSON text; a failure before one exists reads as no answer.

    It hands the kernel's side only built-ins that C made (`_C_MADE`): each name the stub uses is looked
    up in the kernel's builtins and kept only if it is C's own function of that name or a class only C can
    make; else the answer is "Tampered" (the student's failure, and a note), and nothing of the stub runs.
    So `builtins.isinstance`, `exec` or `__import__` replaced in the kernel cannot steer the stub.
    """
    request = base64.b64encode(payload).decode()
    return _ENTRY % dict(names=_STUB_BUILTINS, tampered=kernel_rpc._TAMPERED, compiled=_STUB_COMPILED,
                         magic=importlib.util.MAGIC_NUMBER, source=_STUB_SOURCE, request=request)


# T is `type` and F the built-in function type, both reached from literals; g(value, name) keeps a value only
# if C made it as that name; B the stub's built-ins; m, a, c: marshal.loads, binascii.a2b_base64, compile
_C_MADE = ("(lambda v, n: v if ((T(v) is F and v.__name__ == n) or (T(v) is T and "
           "T.__dict__['__flags__'].__get__(v) & 256 and v.__module__ == 'builtins')) else None)")
_ENTRY = (
    "(lambda T, F, b: (lambda g: (lambda B: %(tampered)r if None in B.values() else "
    "(lambda m, a: %(tampered)r if m is None or a is None else "
    "(lambda ns: (B['exec'](m(a(%(compiled)r)) if B['__import__']('importlib.util').util.MAGIC_NUMBER == %(magic)r "
    "else B['compile'](a(%(source)r).decode(), '<autograder>', 'exec'), ns), ns['handle_request'](%(request)r))[1])"
    "({'__name__': '__autograder_rpc__', '__builtins__': B}))"
    "(g(B['__import__']('marshal').__dict__.get('loads'), 'loads'), "
    "g(B['__import__']('binascii').__dict__.get('a2b_base64'), 'a2b_base64')))"
    "({n: g(b.get(n) if T(b) is {}.__class__ else b.__dict__.get(n), n) for n in %(names)r}))"
    "(" + _C_MADE + "))((0).__class__.__class__, (0).__class__.__class__([].append), __builtins__)")


def _builtins_used(code):
    """The built-in names a code object and the code inside it use (plus those Python's own opcodes look up)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _builtins_used(const)
    return {n for n in names if n in vars(builtins)} | {"__build_class__", "__import__", "exec", "compile"}


# The stub as this interpreter's bytecode (unmarshalled in about 0.3 ms, where compiling takes 5), used by
# a kernel whose Python reads the same bytecode, and as source for any other.
_STUB_CODE = compile(STUB, "<autograder>", "exec")
_STUB_SOURCE = base64.b64encode(STUB.encode()).decode()
_STUB_COMPILED = base64.b64encode(marshal.dumps(_STUB_CODE)).decode()
_STUB_BUILTINS = tuple(sorted(n for n in _builtins_used(_STUB_CODE) if isinstance(vars(builtins)[n], type) or
                              (type(vars(builtins)[n]) is types.BuiltinFunctionType and vars(builtins)[n].__name__ == n)))


# ------------------------------------------------------------------ asking a Jupyter kernel

def silent_request(kc, get_shell_msg, code, expressions, deadline, on_timeout=None, is_alive=None, questions=None):
    """Send one silent execute (no history, no output kept) and return its execute reply.

    get_shell_msg(timeout): the next shell message (raises queue.Empty); deadline(): the monotonic time
    by which the reply must come; past it `on_timeout()` (interrupt the kernel) is called and, 10 s
    later, TimeoutError raised; `is_alive()` False raises DeadKernelError. questions: a function that
    answers the request's questions on the stdin channel (True if there was one), or None.
    """
    from queue import Empty
    msg_id = kc.execute(code, silent=True, store_history=False, user_expressions=expressions,
                        allow_stdin=questions is not None, stop_on_error=False)
    limit, interrupted, wait = deadline(), False, 0.005
    while True:
        if questions is not None and questions(msg_id):
            wait = 0.005  # a conversation under way: look again soon
        try:
            msg = get_shell_msg(timeout=wait)
        except Empty:
            wait = min(0.1, wait * 2)
            if is_alive is not None and not is_alive():
                from nbclient.exceptions import DeadKernelError
                raise DeadKernelError("the kernel died while the student's code ran") from None
            if time.monotonic() > limit:
                if interrupted or on_timeout is None:
                    raise TimeoutError("your code did not finish within the cell's time limit") from None
                interrupted = True
                on_timeout()
                limit = time.monotonic() + 10
            continue
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if interrupted:
            raise TimeoutError("your code did not finish within the cell's time limit")
        return msg


def expression_text(reply, name, limit):
    """The text/plain value of user expression `name` in an execute reply, or None (an error, too long)."""
    found = reply.get("content", {}).get("user_expressions", {}).get(name, {})
    text = found.get("data", {}).get("text/plain") if found.get("status") == "ok" else None
    return text if isinstance(text, str) and len(text) <= limit else None


def kernel_transport(kc, get_shell_msg, deadline, on_timeout=None, is_alive=None, get_stdin_msg=None):
    """A transport over a jupyter KernelClient: one silent execute per request (silent_request).

    A question about a lent object comes as an input_request on the stdin channel
    (get_stdin_msg(timeout), raises queue.Empty), and its answer goes back as the input_reply.
    """
    from queue import Empty

    def transport(payload, answer_callback):
        def questions(msg_id):
            def converse(reply):
                """Send `reply` to the kernel's question; the kernel's next prompt (this request's)."""
                kc.input(reply)
                while True:
                    try:
                        msg = get_stdin_msg(timeout=0.05)
                    except Empty:
                        if is_alive is not None and not is_alive():
                            from nbclient.exceptions import DeadKernelError
                            raise DeadKernelError("the kernel died while the student's code ran") from None
                        if time.monotonic() > deadline():
                            raise TimeoutError("your code did not finish within the cell's time limit") from None
                        continue
                    if msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "input_request":
                        return msg.get("content", {}).get("prompt")

            asked = False
            while True:
                try:
                    msg = get_stdin_msg(timeout=0)
                except Empty:
                    return asked
                if msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "input_request":
                    kc.input(answer_callback(msg.get("content", {}).get("prompt"), converse))
                    asked = True

        reply = silent_request(kc, get_shell_msg, "", {"answer": kernel_expression(payload)}, deadline,
                               on_timeout, is_alive, questions if get_stdin_msg is not None else None)
        text, answer = expression_text(reply, "answer", 2 * MAX_ANSWER_CHARS + 16), None  # (a repr escapes some)
        if text is not None:
            try:
                answer = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
        if not isinstance(answer, str):  # no answer set, or not one we can read: never the student's error
            raise GraderSideError("the kernel gave no readable answer to the grader's request")
        return answer

    return transport
