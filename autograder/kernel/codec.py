"""Reading the kernel's answers: handles on the objects that stay there, and everything else as plain values.

An answer is JSON holding only plain data (numbers, strings, tensors and arrays as raw bytes, containers of
these) or ids: of objects that stay in the kernel (a `Remote` handle) or of objects the test lent to the request.
It is decoded strictly (allow-listed dtypes, shapes that match their bytes, bounded sizes); anything else is an
UnreadableAnswer (a GraderSideError), never data. A request is checked the other way: readable by any kernel
of the course (`readable_in_any_course_kernel`), so a kernel that says it cannot read one was tampered with."""
import base64
import io
import math
import pickle
import re

import numpy as np

from .wire import COURSE_MODULES, DTYPES, MAX_DIMS, MAX_NODES, TORCH_ONLY, GraderSideError, UnreadableAnswer


class Remote:
    """A handle on an object that stays in the student's kernel: every use is ask(op, id, args, kwargs, label), the
    session's request (Session.ask)."""
    __slots__ = ("_asker", "_id", "_label")

    def __init__(self, ask, number, label):
        object.__setattr__(self, "_asker", ask)
        object.__setattr__(self, "_id", number)
        object.__setattr__(self, "_label", label)

    def _ask(self, op, args=(), kwargs=None, label=None):
        return self._asker(op, self._id, args, kwargs or {}, label or self._label)

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
        return self._ask("grads", (tuple(args), dict(kwargs), grad_output), label=f"{self._label}(...) forward and backward")


def handle_id(remote):
    """The kernel's id of the object a Remote handle stands for (how a request names it)."""
    return object.__getattribute__(remote, "_id")


class CourseOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] not in COURSE_MODULES:
            raise pickle.UnpicklingError(f"{module}.{name} is not among the modules every kernel of the course has")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return None


def readable_in_any_course_kernel(payload):
    """Read the request as the kernel will, refusing any module outside COURSE_MODULES: the grader's own check
    that a kernel which says it cannot read a request has had something replaced (never the grader's failure)."""
    CourseOnly(io.BytesIO(payload)).load()


def decode(value, lent, ask, label, callback=False):
    """A kernel answer as plain values built here; anything unexpected is an UnreadableAnswer (a GraderSideError),
    whatever went wrong while reading it, within a budget of MAX_NODES values. lent: {id: object} the test lent to
    the request under way; ask: the session's request, which each `Remote` handle in the answer makes.

    callback: these are the arguments of the kernel's call on a lent object (they may hold lent objects,
    and handles, which the lent object may use: the kernel answers while it waits)."""
    budget = [MAX_NODES]
    try:
        return decode_value(value, (lent, ask), label, 0, callback, budget)
    except (GraderSideError, NotLent):
        raise
    except Exception as e:  # noqa: BLE001: a value the rules above did not foresee is still not data
        raise UnreadableAnswer(f"an unreadable answer ({type(e).__name__})") from None


class NotLent(TypeError):
    """A question's arguments name an object the test did not lend to this call: the kernel's error, not ours."""


def decode_array(value, kind):
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


def decode_torch_name(value, kind):
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


def decode_value(value, held, label, depth, callback, budget):
    """held: (lent, ask), as decode takes them."""
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
        return decode_array(value, kind)
    if kind in ("dtype", "device"):
        return decode_torch_name(value, kind)
    if kind == "slice":
        parts = [decode_value(v, held, label, depth + 1, callback, budget) for v in value["items"]]
        if len(parts) != 3 or any(p is not None and type(p) is not int for p in parts):
            raise UnreadableAnswer("a malformed slice")
        return slice(*parts)
    if kind in ("tuple", "list"):
        items = [decode_value(v, held, f"{label}[{i}]", depth + 1, callback, budget) for i, v in enumerate(value["items"])]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        out = {}
        for k, v in value["items"]:
            key = decode_value(k, held, label, depth + 1, callback, budget)
            if type(key) not in (str, int):
                raise UnreadableAnswer("a dict key that is not a str or int")
            out[key] = decode_value(v, held, f"{label}[{key!r}]", depth + 1, callback, budget)
        return out
    if kind == "handle":
        return Remote(held[1], int(value["id"]), label)
    if kind == "lent":  # the test's own object, lent to this request, coming back (model.eval() returns self)
        number = int(value["id"])
        if number not in held[0]:
            if callback:
                raise NotLent("an object the test did not lend to this call")
            raise UnreadableAnswer("an answer naming an object the test did not lend")
        return held[0][number]
    raise UnreadableAnswer(f"unknown answer kind {kind!r}")
