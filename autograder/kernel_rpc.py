"""The student's side of a grader-side test: answer one request, in the student's kernel.

The grader never sends a test cell to the student's kernel (verdicts.py). It runs the test
on its own side and, whenever the test touches a student object, sends one request here: fetch
a global, call a function or method, read an attribute, take len(), list an iterable, or run a
call with gradients. The request is a pickle made by the grader (arguments by value, remote
handles by id); the answer is JSON that carries only plain data: numbers, strings, tensors and
arrays as raw bytes, containers of these, and ids of objects that stay here (handles), at most
MAX_ANSWER_BYTES of it (the one limit: remote.py reads it from here). Arguments arrive as copies;
an argument the student's code changes in place is reported by position, and the grader's test
fails it (its own tensors never change).

Objects the grader does not send (the test's own code: a fake model, a reference function, a
lambda) arrive *lent*: a `Lent` stand-in whose calls, public attributes, len, items and truth
are questions to the grader, asked with the kernel's `input()` (Jupyter's stdin channel) while
the request runs. A stand-in works only during the request that brought it.

This file is sent with every request (as bytecode, and as source for a kernel whose Python reads other
bytecode) and run in a fresh namespace (`serve` below), as a user expression of a silent execute,
so there is nothing stored in the kernel that a cell could replace except the handle table.
Whatever the student's code changes here, it can only change the data it sends back, which is
its own answer: the comparison happens in the grader's process.

What reads the request and writes the answer is fixed before any student code runs, not looked up
by a name the student's code could rebind: the built-ins this code uses are checked to be C's own
(remote.kernel_expression hands them over, or the request is answered "Tampered"), the request is
read by C's own `_pickle.Unpickler` (found among object's subclasses by flags no Python class can
have), base64 is binascii's C functions, and the answer's JSON is written here (`_json`). So
pickle, json, base64, io or contextlib patched in the kernel change nothing a request does.
"""
import sys

MAX_ANSWER_BYTES = 16 * 2**20  # the largest answer of any lesson's tests is about 0.2 MB
MAX_NODES = 200_000  # values in one answer (containers, items, tensors): past it, an answer too large
BUILTIN_ERRORS = ("ArithmeticError AssertionError AttributeError IndexError KeyError LookupError NameError "
                  "NotImplementedError OverflowError RecursionError RuntimeError TypeError "
                  "ValueError ZeroDivisionError MemoryError").split()
_ERROR_CLASSES = {klass.__name__: klass for klass in (
    ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, LookupError, NameError, NotImplementedError,
    OverflowError, RecursionError, RuntimeError, TypeError, ValueError, ZeroDivisionError, MemoryError, StopIteration)}


# ------------------------------------------------------------------ the tools, as C made them

_type = (0).__class__.__class__  # `type`, from a literal: no name a cell could rebind
_FLAGS = _type.__dict__["__flags__"].__get__
_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: only C code makes such a class, and its name cannot change
_BUILTIN_FUNCTION = _type([].append)


class Tampered(Exception):
    """What this side reads or writes with is not what C made (a patched module): the answer says so."""


def _c_class(module, name):
    """The class C code made as module.name: among object's direct subclasses, never through a module attribute."""
    for klass in _type.__subclasses__(object):
        if _type(klass) is _type and _FLAGS(klass) & _IMMUTABLE and klass.__module__ == module \
                and klass.__name__ == name:
            return klass
    raise Tampered(f"{module}.{name}")


def _c_function(module, name):
    """module.name, if it is C's own built-in function of that name (a Python replacement is not)."""
    found = getattr(sys.modules.get(module), name, None)
    if _type(found) is not _BUILTIN_FUNCTION or found.__name__ != name:
        raise Tampered(f"{module}.{name}")
    return found


def _b64decode(text):
    return _c_function("binascii", "a2b_base64")(text)


def _b64encode(data):
    return _c_function("binascii", "b2a_base64")(data, newline=False).decode("ascii")


class _Reader:
    """The file a pickle is read from: this code's own, fresh with each request."""

    def __init__(self, data):
        self.data, self.at = bytes(data), 0

    def read(self, n=-1):
        end = len(self.data) if n is None or n < 0 else self.at + n
        chunk, self.at = self.data[self.at:end], min(end, len(self.data))
        return chunk

    def readline(self):
        end = self.data.find(b"\n", self.at)
        return self.read(len(self.data) - self.at if end < 0 else end + 1 - self.at)


def _load(data):
    """A request's pickle read by C's own Unpickler; handles and lent objects by their ids."""

    class Unpickler(_c_class("_pickle", "Unpickler")):
        def persistent_load(self, pid):
            if pid[0] == "g":
                return Lent(int(pid[1]), str(pid[2]))
            return _table()[pid[1]]

    return Unpickler(_Reader(data)).load()


_JSON_ESCAPES = {**{i: "\\u%04x" % i for i in range(32)}, 34: '\\"', 92: "\\\\"}


def _json(value):
    """JSON text of plain data (None, bools, str, int, lists, tuples, str-keyed dicts), written here."""
    kind = _type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is str:
        return '"' + str.translate(value, _JSON_ESCAPES) + '"'
    if kind is int:
        return int.__repr__(value)
    if kind is list or kind is tuple:
        return "[" + ",".join([_json(v) for v in value]) + "]"
    if kind is dict:
        return "{" + ",".join([_json(str(k)) + ":" + _json(v) for k, v in dict.items(value)]) + "}"
    raise TypeError(f"not plain data: {kind.__name__}")


class _Sink:
    """Where the student's prints go during a request: nowhere."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


def _table():
    """The kernel's handle table: {id: object}. It lives in sys.modules so that it outlasts one request."""
    holder = sys.modules.get("__autograder_handles__")
    if holder is None or not isinstance(getattr(holder, "objects", None), dict):
        import types
        holder = types.ModuleType("__autograder_handles__")
        holder.objects = {}
        sys.modules["__autograder_handles__"] = holder
    return holder.objects


class TooLarge(Exception):
    """An answer past MAX_ANSWER_BYTES: the student's, reported as returning more than the grader accepts."""


_LENDING = {"ask": None, "namespace": None, "in_kernel": False}  # this request's way to ask the grader: None once the request is over


class Lent:
    """A stand-in for an object the grader lent to this request: every use is a question to the grader."""
    __slots__ = ("_number", "_label")

    def __init__(self, number, label):
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_label", label)

    def __call__(self, *args, **kwargs):
        torch = sys.modules.get("torch")
        if torch is not None and torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in list(args) + list(kwargs.values())):
            return _call_in_graph(self, args, kwargs)
        return _on_device_of(list(args) + list(kwargs.values()), _ask_grader("call", self, args, kwargs))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"the test's {self._label} shows only its public attributes, not {name!r}")
        return _ask_grader("getattr", self, (name,))

    def __setattr__(self, name, value):
        raise AttributeError(f"the test's {self._label} cannot be changed")

    def __len__(self):
        return _ask_grader("len", self)

    def __iter__(self):
        return iter(_ask_grader("list", self))

    def __next__(self):
        return _ask_grader("next", self)

    def __getitem__(self, key):
        return _ask_grader("getitem", self, (key,))

    def __bool__(self):
        return _ask_grader("bool", self)

    def __repr__(self):
        return f"<the test's {self._label}>"


def _ask_grader(op, lent, args=(), kwargs=None):
    ask = _LENDING["ask"]
    if ask is None:
        raise RuntimeError(f"the test's {lent._label} was lent only for the call it was passed to")
    question = _json({"op": op, "id": lent._number, "args": encode(list(args)), "kwargs": encode(dict(kwargs or {}))})
    kind, value = _load(_b64decode(ask(question)))
    while kind == "request":  # the lent object uses this notebook's objects: serve that, then ask again
        answer = _json({"op": "answer", "text": _serve(value, _LENDING["namespace"])})
        kind, value = _load(_b64decode(ask(answer)))
    if kind == "ok":
        return value
    error = _ERROR_CLASSES.get(str(value), RuntimeError)
    raise error(f"the test's {lent._label} raised {value} (run this test cell in your notebook to see why)")


def _on_device_of(inputs, out):
    """A lent call's tensors, which the grader made on its CPU, on the device of the call's tensors."""
    torch = sys.modules.get("torch")
    device = next((a.device for a in inputs if torch is not None and isinstance(a, torch.Tensor)), None)
    if device is None or device.type == "cpu":
        return out
    if isinstance(out, torch.Tensor):
        return out.to(device)
    if type(out) in (tuple, list):
        return type(out)(o.to(device) if isinstance(o, torch.Tensor) else o for o in out)
    return out


def _call_in_graph(lent, args, kwargs):
    """A lent call inside the student's autograd graph: the grader runs the forward pass and, when the
    student's backward pass reaches it, the vector-Jacobian product (both during the request that lent it)."""
    import torch
    keys = list(kwargs)
    given = list(args) + list(kwargs.values())
    values = [torch.Tensor.detach(v) if isinstance(v, torch.Tensor) else v for v in given]
    inputs = [i for i, v in enumerate(given) if isinstance(v, torch.Tensor) and v.requires_grad]

    class LentCall(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            out = _on_device_of(given, _ask_grader("call", lent, values[:len(args)], dict(zip(keys, values[len(args):]))))
            return tuple(out) if type(out) is list else out

        @staticmethod
        def backward(ctx, *grad_outputs):
            grads = _ask_grader("vjp", lent, (values[:len(args)], dict(zip(keys, values[len(args):])),
                                              [torch.Tensor.detach(g) if isinstance(g, torch.Tensor) else None
                                               for g in grad_outputs]))
            return tuple(_on_device_of([given[i]], grads[i]) if type(grads) is list and i < len(grads) else None
                         for i in inputs)

    return LentCall.apply(*(given[i] for i in inputs))


def _keep(value):
    table = _table()
    number = len(table) + 1
    table[number] = value
    return number


def encode(value, depth=0, budget=None):
    """Plain data as JSON-able structures; anything else stays here and goes out as a handle."""
    import numpy as np
    torch = sys.modules.get("torch")
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge("an answer of too many values")
    if depth > 20:
        return {"t": "handle", "id": _keep(value), "kind": type(value).__name__[:60]}
    if value is None or type(value) in (bool, str):
        return value if value is not None else {"t": "none"}
    if type(value) is Lent:
        return {"t": "lent", "id": object.__getattribute__(value, "_number")}
    if type(value) is int:
        return {"t": "int", "v": str(value)}
    if type(value) is float:
        return {"t": "float", "v": repr(value)}
    if torch is not None and isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
        tensor = value.detach().cpu()
        original = str(tensor.dtype).replace("torch.", "")
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()
        if tensor.numel() * tensor.element_size() > MAX_ANSWER_BYTES // 2:
            raise TooLarge("an answer too large to send")
        array = tensor.contiguous().numpy()
        return {"t": "tensor", "dtype": str(array.dtype), "as": original, "shape": list(array.shape),
                "b64": _b64encode(array.tobytes())}
    if type(value) is np.ndarray:
        if value.nbytes > MAX_ANSWER_BYTES // 2:
            raise TooLarge("an answer too large to send")
        array = np.ascontiguousarray(value)
        if array.dtype.hasobject:
            return {"t": "handle", "id": _keep(value), "kind": "ndarray(object)"}
        return {"t": "ndarray", "dtype": str(array.dtype), "shape": list(array.shape),
                "b64": _b64encode(array.tobytes())}
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and not isinstance(value, np.object_):
        array = np.asarray(value)
        return {"t": "npscalar", "dtype": str(array.dtype), "b64": _b64encode(array.tobytes())}
    if torch is not None and type(value) is torch.dtype:
        return {"t": "dtype", "v": str(value).replace("torch.", "")}
    if torch is not None and type(value) is torch.device:
        return {"t": "device", "v": str(value)}
    if type(value) is slice:
        return {"t": "slice", "items": [encode(v, depth + 1, budget) for v in (value.start, value.stop, value.step)]}
    if torch is not None and type(value) is torch.Size:
        return {"t": "tuple", "items": [encode(int(s), depth + 1, budget) for s in value]}
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        return {"t": "list" if type(value) is list else "tuple", "items": [encode(v, depth + 1, budget) for v in value]}
    if type(value) is dict and all(type(k) in (str, int) for k in value):
        return {"t": "dict", "items": [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in value.items()]}
    return {"t": "handle", "id": _keep(value), "kind": type(value).__name__[:60]}


def _arrays(args, kwargs):
    """{position or keyword: (argument, a copy of its bytes)} for the tensor and array arguments."""
    import numpy as np
    torch = sys.modules.get("torch")
    found = {}
    for key, value in list(enumerate(args)) + list(kwargs.items()):
        if torch is not None and type(value) is torch.Tensor:
            found[str(key)] = (value, value.detach().cpu().clone())
        elif type(value) is np.ndarray:
            found[str(key)] = (value, value.copy())
    return found


def _changed(before, in_place=False):
    """The tensor and array arguments the student's code changed in place: a list of their positions or
    keywords, or, where the test allows changes in place (cu.in_place_allowed), {key: new contents}.

    Otherwise only which ones: never their contents, so that nothing the kernel computes reaches the
    test's own tensors (a function that zeroed its input would otherwise zero a reference computed after it)."""
    import numpy as np
    torch = sys.modules.get("torch")
    out = []
    for key, (value, copy) in before.items():
        if torch is not None and type(value) is torch.Tensor:
            now = value.detach().cpu()
            same = now.shape == copy.shape and now.dtype == copy.dtype and bool(torch.equal(now, copy) or (
                now.is_floating_point() and torch.equal(torch.nan_to_num(now, 0.5), torch.nan_to_num(copy, 0.5))
                and torch.equal(now.isnan(), copy.isnan())))
        else:
            same = value.shape == copy.shape and value.dtype == copy.dtype and value.tobytes() == copy.tobytes()
        if not same:
            out.append(key)
    return {key: encode(before[key][0]) for key in out} if in_place else out


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


def _forbidding(stack, refusals):
    """The test's forbidden operators refused during the call: by modes in this thread (which name the function
    the code called) and, in a grading kernel, by the dispatcher in every thread (no thread, custom op or
    disabled mode gets past it). Not in the grader's own process (the in-process transport of tests), where the
    test's lent objects run beside the call and may use them. `only`: the test's launcher_only allow-list (None:
    none), refused by a dispatch mode in this thread."""
    names, only = refusals
    if only is None and not names:
        return
    import course_utils.checks as checks
    if only is not None:
        stack.enter(checks.allowed_ops(*only))
    if not names:
        return
    if _LENDING["in_kernel"]:
        stack.enter(checks.forbidden_in_every_thread(*names))
    stack.enter(checks.forbidden_ops(*names))


def _measuring(stack, meters):
    """What the call does, measured as the test asked: "memory", the tensors it allocates (as
    course_utils.memory.TensorMemory counts them, and as allocations.AllocatedMemory counts them one level lower,
    where TorchScript and autograd's own operators are seen too: the larger figures count); "work": in a grading
    kernel its Triton launches go to the grader, which runs and counts them (_LaunchesElsewhere), so nothing is
    measured here. Returns {meter: measurement}. In a grading kernel a memory measurement also notes work its meters (this thread's
    torch modes) cannot see: "unseen", a list of UNSEEN's words (other threads' operators not where the grader
    measures the kernel's resident memory from outside, "resident", which sees their allocations itself)."""
    meters = meters if type(meters) is tuple else ()
    taken = {}
    if "memory" in meters:
        from course_utils.allocations import AllocatedMemory
        from course_utils.memory import TensorMemory
        if _LENDING["in_kernel"]:
            taken["unseen"] = stack.enter(_WorkElsewhere(threads="resident" not in meters))
        taken["memory"] = (stack.enter(TensorMemory()), stack.enter(AllocatedMemory()))
    if "work" in meters and _LENDING["in_kernel"]:  # (in the grader's own process its open blocks count the call)
        stack.enter(_LaunchesElsewhere())
    return taken


class _LaunchesElsewhere:
    """Entered: every Triton kernel launch is a question to the grader, which runs it in a process of its own and
    counts its work there (autograder/kernel_meter.py); this kernel sends the launched function's source, the
    jitted functions and constants it reads, the grid and the arguments (tensors as their storages' bytes), and
    gets back only the bytes the launch wrote, copied into the arguments' storages."""

    def __enter__(self):
        self.saved = []
        if sys.modules.get("triton") is None:  # no Triton here: no kernel can launch
            return self
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
        for owner in (InterpretedFunction, JITFunction):
            self.saved.append((owner, owner.__dict__["run"]))
            owner.run = _launch_elsewhere
        return self

    def __exit__(self, kind, error, traceback):
        for owner, run in self.saved:
            owner.run = run


def _launch_elsewhere(self, *args, grid, warmup=False, **kwargs):
    """A kernel launch (InterpretedFunction.run or JITFunction.run), sent to the grader's meter."""
    import course_utils.checks as checks
    if warmup:
        return None
    with checks.torch_modes_off():
        storages, owners = [], {}
        question = {"op": "launch", "kernel": self.fn.__name__, "sources": {}, "globals": {}}
        _kernel_sources(self, question["sources"], question["globals"])
        names = list(self.arg_names)
        bound = dict(zip(names, args), **kwargs)
        if callable(grid):
            grid = grid(dict(bound))
        question["grid"] = [int(g) for g in (grid if type(grid) in (tuple, list) else (grid,))]
        question["args"] = [_launch_value(a, storages, owners) for a in args]
        question["kwargs"] = {str(k): _launch_value(v, storages, owners) for k, v in kwargs.items()}
        question["storages"] = [_b64encode(_storage_bytes(s)) for s in storages]
        ask = _LENDING["ask"]
        if ask is None:
            raise RuntimeError("a kernel launched outside the grader's call")
        kind, value = _load(_b64decode(ask(_json(question))))
        if kind != "ok":
            raise _ERROR_CLASSES.get(str(value), RuntimeError)(
                "the grader could not run this kernel launch (run this test cell in your notebook to see why)")
        for index, data in value.items():
            _storage_write(storages[index], data)
    return None


def _kernel_sources(jitted, sources, constants):
    """The source of a jitted function (decorators stripped, as Triton reads it) and, through the globals its code
    names, of every jitted function it calls; the other globals it names, as plain data or their kind."""
    import inspect
    import re
    import textwrap
    fn = jitted.fn
    if fn.__name__ in sources:
        return
    source = textwrap.dedent(inspect.getsource(fn))
    start = re.search(r"^def\s+\w+\s*\(", source, re.MULTILINE)
    sources[fn.__name__] = source[start.start():] if start else source
    import dis
    names, stack = set(), [fn.__code__]
    while stack:  # the names its code loads as globals (an attribute's name, tl.exp's "exp", is not one)
        code = stack.pop()
        names |= {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        stack += [c for c in code.co_consts if _type(c) is _type(fn.__code__)]
    for name in sorted(names):
        if name not in fn.__globals__ or name in constants:
            continue
        value = fn.__globals__[name]
        if hasattr(value, "fn") and hasattr(value, "arg_names") and callable(getattr(value, "run", None)):
            constants[name] = {"t": "jit"}
            if value.fn.__name__ != name:
                constants[name] = {"t": "other", "kind": "a jitted function under another name"}
            _kernel_sources(value, sources, constants)
        else:
            constants[name] = _global_value(value)


def _global_value(value):
    """A global a kernel reads, as the meter accepts it: a module by name, a constant, a Triton dtype."""
    import types
    if isinstance(value, types.ModuleType):
        return {"t": "module", "v": value.__name__}
    if value is None or _type(value) in (bool, int, str):
        return {"t": "const", "v": value}
    if _type(value) is float:
        return {"t": "float", "v": repr(value)}
    kind = _type(value)
    if kind.__module__.startswith("triton.language") and kind.__name__ == "constexpr":
        inner = value.value
        return {"t": "constexpr", "v": _launch_value(inner, [], {})} if _type(inner) in (bool, int, str, float) \
            else {"t": "other", "kind": "constexpr"}
    if kind.__module__.startswith("triton.language") and kind.__name__ == "dtype":
        return {"t": "tldtype", "v": str(value.name) if hasattr(value, "name") else str(value)}
    return {"t": "other", "kind": kind.__name__[:40]}


def _launch_value(value, storages, owners):
    """A launch argument as plain data; a tensor as (its storage's index, dtype, offset, size, stride)."""
    torch = sys.modules.get("torch")
    if value is None or _type(value) in (bool, int, str):
        return value
    if _type(value) is float:
        return {"t": "float", "v": repr(value)}
    if torch is not None and isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        key = (storage.data_ptr(), storage.device.type, storage.nbytes())
        if key not in owners:
            owners[key] = len(storages)
            storages.append(storage)
        return {"t": "tensor", "s": owners[key], "dtype": str(value.dtype).replace("torch.", ""),
                "off": int(value.storage_offset()), "size": [int(n) for n in value.shape],
                "stride": [int(n) for n in value.stride()]}
    if _type(value) in (tuple, list):
        return {"t": "tuple" if _type(value) is tuple else "list",
                "items": [_launch_value(v, storages, owners) for v in value]}
    kind = _type(value)
    if kind.__module__.startswith("triton.language") and kind.__name__ == "dtype":
        return {"t": "tldtype", "v": str(value.name)}
    if kind.__module__.startswith("triton.language") and kind.__name__ == "constexpr":
        return {"t": "constexpr", "v": _launch_value(value.value, storages, owners)}
    if kind.__name__ == "TensorDescriptor" and kind.__module__.startswith("triton"):
        return {"t": "descriptor", "base": _launch_value(value.base, storages, owners),
                "shape": [int(n) for n in value.shape], "strides": [int(n) for n in value.strides],
                "block_shape": [int(n) for n in value.block_shape], "padding": str(getattr(value, "padding", "zero"))}
    return {"t": "other", "kind": kind.__name__[:40]}


def _storage_bytes(storage):
    import torch
    return torch.empty(0, dtype=torch.uint8).set_(storage.cpu()).numpy().tobytes()


def _storage_write(storage, data):
    import torch
    source = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    target = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    if target.numel() == source.numel():
        target.copy_(source.to(storage.device))


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

    def __init__(self, threads=True):
        self.threads = threads  # False: no profiler (the grader measures the kernel's resident memory, which sees
        # other threads' allocations, and would count the profiler's own: about 3 KB per operator it records)

    def __enter__(self):
        import threading

        from torch._C._profiler import _ExperimentalConfig
        from torch.autograd.profiler import profile, record_function  # (torch.profiler's imports torch._dynamo: 2 s)

        import course_utils.checks as checks
        self.unseen, (self.watch, self.bridged) = [], _bridge_watch()
        self.every_thread = getattr(threading, "setprofile_all_threads", None)  # Python 3.12: threads running too
        self.threading, self.before, self.before_threads = threading, sys.getprofile(), threading.getprofile()
        self.inner = _Stack()
        self.started = self.inner.enter(checks.processes_started())
        self.profiler = self.inner.enter(profile(use_kineto=True, experimental_config=_ExperimentalConfig(
            profile_all_threads=True))) if self.threads else None
        threading.setprofile(self.watch)  # threads started during the call
        sys.setprofile(self.watch)
        if self.every_thread:
            self.every_thread(self.watch)
        if self.threads:
            self.inner.enter(record_function(_CALL_MARK))
        return self.unseen

    def __exit__(self, kind, error, traceback):
        mark = self.inner.entered.pop() if self.threads else None  # the call's mark ends first, then the watch,
        try:                                                        # then the profiler
            if mark is not None:
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
        self.unseen += ["thread"] * (self.threads and _operators_on_other_threads(self.profiler))


def _bridge_watch():
    """(profile function, list): the list gets the name of a bridge (_BRIDGES) once the watched code has taken
    _BRIDGE_MIN elements or more from tensors to numpy, DLPack or Python data, in one call or in many smaller ones
    (a .numpy() of 512 elements at a time adds up); `.tolist()` counts per call (a decoding loop may list a few
    tokens at every step). torch's and the grader's own calls excepted."""
    import os

    import torch

    import course_utils
    own = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, course_utils)) + ("<autograder", "<kernel_rpc")
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


def _grads(fn, args, kwargs, grad_output):
    import course_utils.checks as checks
    return checks.local_call_with_grads(fn, *args, grad_output=grad_output, **kwargs)


def _other(op, obj, args):
    """The requests that only read the object: attributes, len, items, truth (a property may run student code)."""
    if op == "getattr":
        return getattr(obj, args[0])
    if op == "setattr":
        setattr(obj, args[0], args[1])
        return None
    if op == "len":
        return len(obj)
    if op == "list":
        return list(obj)
    if op == "getitem":
        return obj[args[0]]
    if op == "bool":
        return bool(obj)
    raise ValueError(f"unknown request {op!r}")


class _StandingIn:
    """The test's parts (lent) bound to their names in the notebook's namespace while the request runs."""

    def __init__(self, namespace, parts):
        if type(parts) is not dict or not all(type(name) is str and type(part) is Lent for name, part in parts.items()):
            raise TypeError("stand-ins must be lent parts")
        self.namespace, self.parts = namespace, parts

    def __enter__(self):
        self.missing = object()
        self.saved = {name: self.namespace.get(name, self.missing) for name in self.parts}
        self.namespace.update(self.parts)

    def __exit__(self, kind, error, traceback):
        for name, value in self.saved.items():
            if value is self.missing:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value


def serve(request, namespace, ask_grader=None):
    """Answer one request (pickled bytes) against `namespace` (the notebook's globals); returns JSON text.

    ask_grader(question text) -> answer text: how a lent object asks the grader (None: nothing can be lent)."""
    _LENDING["ask"], _LENDING["namespace"] = ask_grader, namespace
    try:
        return _serve(request, namespace)
    finally:
        _LENDING["ask"], _LENDING["namespace"] = None, None


def _serve(request, namespace):
    try:
        op, target, args, kwargs, forbidden, meters, in_place, stand_ins, only = _load(request)
    except Tampered:
        return _TAMPERED
    except Exception as e:  # noqa: BLE001: the grader sent what this kernel cannot read: the grader's problem
        return _json({"ok": False, "grader": f"the kernel could not read the request ({_type(e).__name__})"})
    try:
        answer = _answer(op, target, args, kwargs, (forbidden, only), meters, in_place, stand_ins, namespace)
    except BaseException as e:  # noqa: BLE001: the student's error is reported as its kind only
        answer = _error(e)
    try:
        text = _json(answer)
    except BaseException:  # noqa: BLE001: an answer this code cannot write is the student's doing (a patched meter)
        return '{"ok": false, "error": "Exception"}'
    return text if len(text) <= MAX_ANSWER_BYTES else '{"ok": false, "error": "TooLarge"}'


_TAMPERED = '{"ok": false, "error": "Tampered"}'


def _answer(op, target, args, kwargs, refusals, meters, in_place, stand_ins, namespace):
    """Run the request against the notebook's namespace: the answer as plain data (raises the student's error)."""
    changed, measured, stack = [], {}, _Stack()
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Sink(), _Sink()
    try:
        stack.enter(_StandingIn(namespace, stand_ins))
        if op == "get":
            if target not in namespace:
                raise NameError(target)
            value = namespace[target]
        elif op in ("call", "grads"):
            obj = _table()[target]
            before = _arrays(args, kwargs) if op == "call" else {}
            call = _Stack()
            try:
                _forbidding(call, refusals)
                measured = _measuring(call, meters)
                if op == "call":
                    value = obj(*args, **kwargs)
                else:  # args: (call args, call kwargs, grad_output)
                    value = _grads(obj, args[0], args[1], args[2])
            except BaseException as e:  # noqa: BLE001: left as a with statement leaves, then raised
                call.close(e)
            call.close()
            changed = _changed(before, in_place)
        else:
            obj = _table()[target]
            call = _Stack()
            try:
                _forbidding(call, refusals)
                value = _other(op, obj, args)
            except BaseException as e:  # noqa: BLE001
                call.close(e)
            call.close()
    except BaseException as e:  # noqa: BLE001
        stack.close(e)
    finally:
        sys.stdout, sys.stderr = streams
    stack.close()
    return {"ok": True, "value": encode(value), "changed": changed, **_measurements(measured)}


def _error(e):
    """A failed request's answer: the kind of the student's error (an allow-listed name), never its text.

    Read with care: the error is the student's object, and a property that raises while it is read is still
    the student's error, never the grader's (whose failures only the grader decides)."""
    try:
        kind = _type(e)
        if kind is TooLarge or kind is Tampered:
            return {"ok": False, "error": kind.__name__}
        checks = sys.modules.get("course_utils.checks")
        if checks is not None and kind is getattr(checks, "ForbiddenCall", None):
            used = BaseException.__getattribute__(e, "__dict__").get("forbidden")
            return {"ok": False, "error": "ForbiddenCall", "forbidden": used if _type(used) is str else None}
        for klass in _type.__dict__["__mro__"].__get__(kind):
            name = _type.__dict__["__name__"].__get__(klass)
            if name in BUILTIN_ERRORS and _ERROR_CLASSES[name] is klass:
                return {"ok": False, "error": name}
    except BaseException:  # noqa: BLE001
        pass
    return {"ok": False, "error": "Exception"}


def handle_request(b64_request):
    """Entry point in the kernel: the answer's JSON text. The notebook's namespace is IPython's user namespace."""
    ipython = sys.modules.get("IPython")  # not builtins' get_ipython: IPython puts it there only while a cell runs
    shell = ipython.get_ipython() if ipython is not None else None
    namespace = shell.user_ns if shell is not None else vars(sys.modules["__main__"])
    kernel = getattr(shell, "kernel", None)
    _LENDING["in_kernel"] = True
    try:
        return serve(_b64decode(b64_request), namespace, getattr(kernel, "raw_input", None))
    except Tampered:
        return _TAMPERED
    finally:
        _LENDING["in_kernel"] = False
