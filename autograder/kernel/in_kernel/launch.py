"""The kernel's side, part 4: Triton launches sent to the grader's meter while a test counts work.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define (tests/autograder/test_modules.py checks)."""
class _LaunchesElsewhere:
    """Entered: every Triton kernel launch is a question to the grader, which runs it in a process of its own and
    counts its work there (autograder/kernel/meter.py); this kernel sends the launched function's source, the
    jitted functions and constants it reads, the grid and the arguments (tensors as their storages' bytes), and
    gets back only the bytes the launch wrote, copied into the arguments' storages."""

    def __enter__(self):
        self.saved = []
        if sys.modules.get("triton") is None:  # no Triton here: no kernel can launch
            return self
        from triton.runtime.interpreter import GridExecutor, InterpretedFunction
        from triton.runtime.jit import JITFunction
        for owner, name, replacement in ((InterpretedFunction, "run", _launch_elsewhere),
                                         (JITFunction, "run", _launch_elsewhere),
                                         (GridExecutor, "__call__", _run_below_launch)):
            self.saved.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, replacement)
        return self

    def __exit__(self, kind, error, traceback):
        for owner, name, original in self.saved:
            setattr(owner, name, original)


def _run_below_launch(self, *args, **kwargs):
    """The interpreter's executor called directly, below a launch: it would run a kernel the meter never sees (a
    reference kept from before the call still runs, but what it computes is no value a metered kernel stored)."""
    raise RuntimeError("a Triton kernel run through the interpreter's executor directly, below a launch: launch it "
                       "as kernel[grid](...), which the grader runs and counts")


def _launch_elsewhere(self, *args, grid, warmup=False, **kwargs):
    """A kernel launch (InterpretedFunction.run or JITFunction.run), sent to the grader's meter."""
    import course_utils.charged_once as charged_once
    if warmup:
        return None
    with charged_once.torch_modes_off():
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
        kind, value = _load(_b64decode(ask(_json(question))), Lent)
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
