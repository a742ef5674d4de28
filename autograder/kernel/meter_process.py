"""The kernel meter's own process: lesson 11's launches checked and run in Triton's interpreter, counted.

Run as a script (`Meter` in meter.py starts it, through bubblewrap where there is one); the parent imports it
only for the framing and the limits. Standard library only at import: `serve` imports torch, Triton and
course_utils.kernels when the process starts, and puts the counter in place before any kernel's source is read.
"""
import base64
import json
import os
import struct
import sys

MAX_LAUNCH_BYTES = 64 << 20  # storages in one launch: the lesson's tests send about 0.1 MB
MAX_REPLY_BYTES = 4 * MAX_LAUNCH_BYTES
LAUNCH_SECONDS = 600  # one launch in the interpreter; the lesson's largest test launch takes about a second
SAFE_BUILTINS = ("range", "min", "max", "float", "int", "bool", "len", "abs", "isinstance", "print")


class Timeout(TimeoutError):
    """A launch that ran out of its cell's time with the CPU it needed: the student's (an endless loop)."""


class Refused(Exception):
    """A kernel the meter will not run (what Triton's compiler would not accept): the student's, with why."""


def send(stream, data):
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream, limit, seconds=None):
    import select
    if seconds is not None and not select.select([stream], [], [], seconds)[0]:
        raise TimeoutError(f"no answer in {seconds} s")
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the meter ended")
    size = struct.unpack("<Q", head)[0]
    if size > limit:
        raise ValueError("an answer past its limit")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the meter ended mid-answer")
    return data


def check(source, namespace, value_attributes):
    """The parsed function, or Refused(why): `source` (one function, its decorators stripped) may use only what a
    Triton kernel may: Python's statements and expressions that Triton's compiler reads; no name or attribute that
    starts with "__" (and no attribute with "_"); a module (a global of `namespace`) only as the start of an
    attribute chain that `_module_attribute` allows (triton.language's public functions, types, constants and
    modules, math's); on any other value only `value_attributes` (a Triton tensor's, dtype's or descriptor's)."""
    import ast
    import types
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise Refused(f"its source does not parse ({e.msg})") from None
    if len(tree.body) != 1 or type(tree.body[0]) is not ast.FunctionDef or tree.body[0].decorator_list:
        raise Refused("its source is not one undecorated function")
    allowed = (ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Assign, ast.AugAssign,
               ast.AnnAssign, ast.For, ast.While, ast.If, ast.Expr, ast.Pass, ast.Break, ast.Continue, ast.Assert,
               ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Attribute,
               ast.Subscript, ast.Slice, ast.Name, ast.Constant, ast.Tuple, ast.List, ast.JoinedStr,
               ast.FormattedValue, ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def module_of(node):  # the module an expression names, checked link by link (None: not a module)
        if type(node) is ast.Name:
            found = namespace.get(node.id)
            return found if isinstance(found, types.ModuleType) else None
        if type(node) is ast.Attribute:
            owner = module_of(node.value)
            if owner is not None:
                found = _module_attribute(owner, node.attr)
                return found if isinstance(found, types.ModuleType) else None
        return None

    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if not isinstance(node, allowed):
            raise Refused(f"it uses {type(node).__name__} (line {line}), which a Triton kernel cannot")
        if node is not tree.body[0] and type(node) is ast.FunctionDef:
            raise Refused(f"it defines a function inside the kernel (line {line})")
        if type(node) in (ast.Name, ast.arg):
            name = getattr(node, "id", None) or node.arg
            if name.startswith("__"):
                raise Refused(f"it names {name!r} (line {line}): a kernel reaches nothing private")
        if type(node) is ast.Attribute:
            if node.attr.startswith("_"):
                raise Refused(f"it reads the attribute {node.attr!r} (line {line}): a kernel reaches nothing private")
            owner = module_of(node.value)
            if owner is None and node.attr not in value_attributes:
                raise Refused(f"it reads .{node.attr} (line {line}), which is not a Triton tensor's, dtype's or "
                              "descriptor's")
        if module_of(node) is not None and not (type(parent.get(node)) is ast.Attribute and parent[node].value is node):
            raise Refused(f"it uses a module as a value (line {line}): name tl.something, never tl itself")
    return tree


def value_attributes(tl):
    """The attributes a kernel may read on a value: a Triton tensor's, dtype's, constexpr's and tensor
    descriptor's public ones, and tl.PropagateNan's members (never `handle`, the interpreter's own data)."""
    kinds = [tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr]
    kinds += [getattr(tl, name) for name in ("tensor_descriptor", "PropagateNan") if hasattr(tl, name)]
    names = {n for kind in kinds for n in dir(kind) if not n.startswith("_")}
    return (names | {"shape", "numel", "type", "dtype", "T", "element_ty", "value", "scalar"}) - {"handle"}


def _module_attribute(module, name):
    """module.name if a kernel may use it: triton.language's own public functions, types, constants and
    submodules, math's functions and constants, and triton's cdiv, next_power_of_2 and language."""
    import types
    if name.startswith("_"):
        raise Refused(f"it uses {module.__name__}.{name}")
    if module.__name__ == "triton":
        if name not in ("language", "cdiv", "next_power_of_2"):
            raise Refused(f"it uses triton.{name}, which a kernel cannot")
        return getattr(module, name)
    value = getattr(module, name, None)
    if value is None:
        raise Refused(f"{module.__name__} has no {name}")
    if isinstance(value, types.ModuleType):
        if not value.__name__.startswith("triton.language"):
            raise Refused(f"it uses {module.__name__}.{name}, which is not part of triton.language")
        return value
    owner = getattr(value, "__module__", None) or ""
    # triton.language's functions are jitted (JITFunction, or InterpretedFunction in the interpreter), its types
    # and their instances its own; PropagateNan, an enum of tl.maximum's, comes from Triton's compiler
    if module.__name__ == "math" or not callable(value) or name == "PropagateNan" or \
            owner.startswith(("triton.language", "triton.runtime.jit", "triton.runtime.interpreter")):
        return value
    raise Refused(f"it uses {module.__name__}.{name}, which is not Triton's")


def _namespaces(question, triton, tl, cache):
    """{name: interpreted function} for the question's sources, each checked, in one namespace with its globals."""
    import hashlib
    import linecache
    import math
    key = hashlib.sha256(json.dumps([question["sources"], question["globals"]], sort_keys=True).encode()).hexdigest()
    if key in cache:
        return cache[key]
    sources = question["sources"]
    if type(sources) is not dict or question["kernel"] not in sources or len(sources) > 64:
        raise Refused("the launch names no kernel source")
    modules = {"triton": triton, "triton.language": tl, "math": math}
    safe = {n: getattr(__import__("builtins"), n) for n in SAFE_BUILTINS}
    safe["print"] = lambda *args, **kwargs: None  # (stdout is the grader's channel)
    namespace = {"__builtins__": safe}
    for name, value in dict(question["globals"]).items():
        if type(name) is not str or not name.isidentifier() or name.startswith("__"):
            raise Refused(f"a global named {str(name)[:40]!r}")
        kind = value.get("t") if type(value) is dict else None
        target = str(value.get("v")) if kind == "module" else ""
        if kind == "module" and (target in modules or target.startswith("triton.language.")):
            namespace[name] = modules.get(target) or __import__(target, fromlist=["_"])
        elif kind == "const" and (value.get("v") is None or type(value.get("v")) in (int, bool, str)):
            namespace[name] = value.get("v")
        elif kind == "float":
            namespace[name] = float(value["v"])
        elif kind == "constexpr":
            namespace[name] = tl.constexpr(_scalar(value.get("v")))
        elif kind == "tldtype":
            namespace[name] = _tl_dtype(tl, value.get("v"))
        elif kind != "jit":
            raise Refused(f"it reads the global {name!r} ({str(value.get('kind', target or kind))[:40]}), which is "
                          "not tl, another @triton.jit function or a constant")
    functions, attributes = {}, value_attributes(tl)
    for name, source in sources.items():
        if type(name) is not str or type(source) is not str or len(source) > 100_000:
            raise Refused("a malformed kernel source")
        try:
            tree = check(source, namespace, attributes)
        except Refused as e:
            raise Refused(f"the kernel {name} cannot run here: {e}") from None
        filename = f"<student kernel {name} {key[:12]}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(tree, filename, "exec"), namespace)
        functions[name] = namespace[tree.body[0].name] = triton.jit(namespace[tree.body[0].name])
    cache[key] = functions
    return functions


def _scalar(value):
    """A constant as the kernel's side sent it: None, a bool, int or str, or a float as its repr."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is dict and value.get("t") == "float":
        return float(str(value.get("v")))
    raise Refused("a constant that is not a number, a bool or a string")


def _tl_dtype(tl, name):
    """A Triton scalar dtype by its name ("fp32", "bf16", "int64"...)."""
    kinds = tl.dtype
    names = {*kinds.SINT_TYPES, *kinds.UINT_TYPES, *kinds.FP_TYPES, *kinds.OTHER_TYPES}
    if str(name) not in names:
        raise Refused(f"an unknown Triton dtype {str(name)[:20]!r}")
    return tl.dtype(str(name))


def _arguments(question, tl):
    """(args, kwargs, {index: uint8 storage tensor}) rebuilt from the question's storages."""
    import torch
    storages = {}
    for index, data in enumerate(question["storages"]):
        raw = bytearray(base64.b64decode(data, validate=True))
        storages[index] = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    if sum(s.numel() for s in storages.values()) > MAX_LAUNCH_BYTES:
        raise Refused(f"the launch's tensors take more than {MAX_LAUNCH_BYTES >> 20} MB")

    def value(v, depth=0):
        if depth > 8:
            raise Refused("an argument nested too deeply")
        if v is None or type(v) in (bool, int, str):
            return v
        kind = v.get("t") if type(v) is dict else None
        if kind == "float":
            return float(v["v"])
        if kind == "int":
            return int(v["v"])
        if kind == "tensor":
            dtype = getattr(torch, str(v["dtype"]), None)
            if not isinstance(dtype, torch.dtype):
                raise Refused(f"a tensor of dtype {str(v['dtype'])[:20]}")
            base = storages[int(v["s"])]
            size, stride, offset = [int(s) for s in v["size"]], [int(s) for s in v["stride"]], int(v["off"])
            typed = base.view(dtype) if base.numel() % dtype.itemsize == 0 else None
            if typed is None:
                raise Refused("a tensor whose storage does not hold whole elements")
            return typed.as_strided(size, stride, offset)
        if kind == "tldtype":
            return _tl_dtype(tl, v.get("v"))
        if kind == "constexpr":
            return tl.constexpr(value(v.get("v"), depth + 1))
        if kind in ("tuple", "list"):
            items = [value(x, depth + 1) for x in v["items"]]
            return tuple(items) if kind == "tuple" else items
        if kind == "descriptor":
            from triton.tools.tensor_descriptor import TensorDescriptor
            return TensorDescriptor(value(v["base"], depth + 1), [int(s) for s in v["shape"]],
                                    [int(s) for s in v["strides"]], [int(s) for s in v["block_shape"]],
                                    str(v.get("padding", "zero")))
        raise Refused(f"an argument of a kind a kernel cannot take ({str((v or {}).get('kind', kind))[:40]})")

    args = [value(a) for a in question["args"]]
    kwargs = {str(k): value(a) for k, a in dict(question["kwargs"]).items()}
    return args, kwargs, storages


def _record(stored, loaded):
    """Wrap the interpreter's loads and stores (after the counter's wrappers): keep every float value a kernel loads
    (its mask let through) or stores, and what each atomic leaves in memory."""
    import numpy as np
    from triton.runtime import interpreter
    builder = interpreter.InterpreterBuilder
    store, scatter, masked_load = builder.create_masked_store, builder.create_descriptor_scatter, builder.create_masked_load
    rmw, cas, load = builder.create_atomic_rmw, builder.create_atomic_cas, interpreter._interpreter.load

    def keep(values, where=stored):  # (returns None: `keep(...) or original(...)` runs both)
        where.append(np.asarray(values, dtype=np.float64).ravel())

    def recorded_load(self, ptrs, mask, *args, **kwargs):
        result = masked_load(self, ptrs, mask, *args, **kwargs)
        if result.data.dtype.kind == "f":
            keep(np.broadcast_to(result.data, ptrs.data.shape)[np.broadcast_to(mask.data, ptrs.data.shape)], loaded)
        return result

    def recorded_store(self, ptrs, value, mask, *args, **kwargs):
        return keep(np.broadcast_to(value.data, ptrs.data.shape)[np.broadcast_to(mask.data, ptrs.data.shape)]) or \
            store(self, ptrs, value, mask, *args, **kwargs)

    def recorded_scatter(self, desc, value, *args, **kwargs):
        return keep(value.data) or scatter(self, desc, value, *args, **kwargs)

    def after(ptrs, mask, dtype):  # the values an atomic left where it wrote
        keep(load(ptrs.data, np.broadcast_to(mask, ptrs.data.shape), np.zeros(ptrs.data.shape, dtype), dtype))

    def recorded_rmw(self, op, ptrs, value, mask, *args, **kwargs):  # (the atomic first, then what it left)
        return (rmw(self, op, ptrs, value, mask, *args, **kwargs), after(ptrs, mask.data, value.data.dtype))[0]

    def recorded_cas(self, ptrs, compare, value, *args, **kwargs):
        return (cas(self, ptrs, compare, value, *args, **kwargs), after(ptrs, np.True_, value.data.dtype))[0]

    builder.create_masked_load, builder.create_masked_store, builder.create_descriptor_scatter = \
        recorded_load, recorded_store, recorded_scatter
    builder.create_atomic_rmw, builder.create_atomic_cas = recorded_rmw, recorded_cas


def _run(question, state):
    """One launch: the reply's dict (work, storages changed, values stored) or {"refused"}/{"error"}."""
    import dataclasses

    import numpy as np
    import torch

    from course_utils.kernels import count_work
    triton, tl = state["triton"], state["tl"]
    try:
        functions = _namespaces(question, triton, tl, state["cache"])
        args, kwargs, storages = _arguments(question, tl)
        grid = tuple(int(g) for g in question["grid"])
        if not 1 <= len(grid) <= 3 or any(g < 0 or g > 1 << 20 for g in grid):
            raise Refused(f"a grid of {grid}")
    except Refused as e:
        return {"refused": str(e)}
    before = {i: s.clone() for i, s in storages.items()}
    state["stored"].clear(), state["loaded"].clear()
    try:
        with count_work() as work:
            functions[question["kernel"]][grid](*args, **kwargs)
    except Exception as e:  # noqa: BLE001: the student's kernel failed
        return {"error": type(e).__name__}
    stored, loaded = (np.unique(np.concatenate(state[k])) if state[k] else np.zeros(0) for k in ("stored", "loaded"))
    changed = {str(i): base64.b64encode(s.numpy().tobytes()).decode() for i, s in storages.items()
               if not torch.equal(s, before[i])}
    return {"work": {f.name: int(getattr(work, f.name)) for f in dataclasses.fields(work)}, "storages": changed,
            "stored": base64.b64encode(stored.astype(np.float64).tobytes()).decode(),
            "loaded": base64.b64encode(loaded.astype(np.float64).tobytes()).decode()}


def serve():
    """The meter: read a launch (length-prefixed JSON) on stdin, answer on stdout, until stdin ends."""
    os.environ["TRITON_INTERPRET"] = "1"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a library prints reaches the grader's channel
    import torch  # noqa: F401
    import triton
    import triton.language as tl

    from course_utils.kernels import count_work
    state = {"triton": triton, "tl": tl, "cache": {}, "stored": [], "loaded": []}
    with count_work():  # the counter in place for the meter's life, before any kernel's source is read
        _record(state["stored"], state["loaded"])
        while True:
            try:
                question = json.loads(receive(stdin, MAX_LAUNCH_BYTES * 2))
            except EOFError:
                return
            try:
                reply = _run(question, state)
            except (KeyError, TypeError, ValueError, IndexError) as e:
                reply = {"refused": f"a malformed launch ({type(e).__name__})"}
            send(stdout, json.dumps(reply).encode())


if __name__ == "__main__":
    serve()
