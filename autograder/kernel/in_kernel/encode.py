"""The kernel's side, part 2: an answer as plain data, and which arguments a call changed in place.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define (tests/autograder/test_modules.py checks)."""
def _keep(value):
    table = _table()
    number = len(table) + 1
    table[number] = value
    return number


_TENSOR_METHODS = {}
NUMBER_KINDS = "biufc"  # numpy's kinds of numbers and booleans: the arrays an answer carries as data


def _tensor(name):
    """TensorBase's own method or attribute `name`, as C made it: a cell that replaces torch.Tensor.cpu, .detach or
    .dtype changes nothing this side reads (TensorBase is an immutable C type, found among object's subclasses)."""
    if not _TENSOR_METHODS:
        _TENSOR_METHODS.update(_type.__dict__["__dict__"].__get__(_c_class("torch._C", "TensorBase")))
    return _TENSOR_METHODS[name]


def _host(value):
    """A detached CPU tensor holding `value`'s numbers, read with TensorBase's own methods."""
    return _tensor("cpu")(_tensor("detach")(value))


def encode(value, lent_type=None, depth=0, budget=None):
    """Plain data as JSON-able structures; anything else stays here and goes out as a handle. lent_type: the class of
    the grader's stand-ins (lent.Lent), sent back as the grader's own object; None where none can be in `value`."""
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
    if lent_type is not None and type(value) is lent_type:
        return {"t": "lent", "id": object.__getattribute__(value, "_number")}
    if type(value) is int:
        return {"t": "int", "v": str(value)}
    if type(value) is float:
        return {"t": "float", "v": repr(value)}
    if torch is not None and isinstance(value, torch.Tensor) and type(value) in (torch.Tensor, torch.nn.Parameter):
        tensor = _host(value)
        dtype = _tensor("dtype").__get__(tensor)
        original = str(dtype).replace("torch.", "")
        if original in ("bfloat16", "float16"):
            tensor = _tensor("float")(tensor)
        if _tensor("numel")(tensor) * _tensor("element_size")(tensor) > MAX_ANSWER_BYTES // 2:
            raise TooLarge("an answer too large to send")
        array = _tensor("numpy")(_tensor("contiguous")(tensor))
        return {"t": "tensor", "dtype": str(array.dtype), "as": original, "shape": list(array.shape),
                "b64": _b64encode(array.tobytes())}
    if type(value) is np.ndarray:
        if value.nbytes > MAX_ANSWER_BYTES // 2:
            raise TooLarge("an answer too large to send")
        array = np.ascontiguousarray(value)
        if array.dtype.kind not in NUMBER_KINDS:  # objects, dates, strings: not an answer the tests read as numbers
            return {"t": "handle", "id": _keep(value), "kind": "ndarray"}
        if not array.dtype.isnative:  # big-endian numbers ('>f8', no dtype the grader reads): the same numbers, native
            array = array.astype(array.dtype.newbyteorder("="))
        return {"t": "ndarray", "dtype": str(array.dtype), "shape": list(array.shape),
                "b64": _b64encode(array.tobytes())}
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and value.dtype.kind in NUMBER_KINDS:
        array = np.asarray(value)
        return {"t": "npscalar", "dtype": str(array.dtype), "b64": _b64encode(array.tobytes())}
    if torch is not None and type(value) is torch.dtype:
        return {"t": "dtype", "v": str(value).replace("torch.", "")}
    if torch is not None and type(value) is torch.device:
        return {"t": "device", "v": str(value)}
    if type(value) is slice:
        return {"t": "slice", "items": [encode(v, lent_type, depth + 1, budget) for v in (value.start, value.stop, value.step)]}
    if torch is not None and type(value) is torch.Size:
        return {"t": "tuple", "items": [encode(int(s), lent_type, depth + 1, budget) for s in value]}
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        return {"t": "list" if type(value) is list else "tuple", "items": [encode(v, lent_type, depth + 1, budget) for v in value]}
    if type(value) is dict and all(type(k) in (str, int) for k in value):
        return {"t": "dict", "items": [[encode(k, lent_type, depth + 1, budget), encode(v, lent_type, depth + 1, budget)] for k, v in value.items()]}
    return {"t": "handle", "id": _keep(value), "kind": type(value).__name__[:60]}


def _arrays(args, kwargs):
    """{position or keyword: (argument, a copy of its bytes)} for the tensor and array arguments."""
    import numpy as np
    torch = sys.modules.get("torch")
    found = {}
    for key, value in list(enumerate(args)) + list(kwargs.items()):
        if torch is not None and type(value) is torch.Tensor:
            found[str(key)] = (value, _tensor("clone")(_host(value)))
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
            now, t = _host(value), _tensor
            same = t("shape").__get__(now) == t("shape").__get__(copy) and \
                t("dtype").__get__(now) == t("dtype").__get__(copy) and bool(t("equal")(now, copy) or (
                    t("is_floating_point")(now) and t("equal")(t("nan_to_num")(now, 0.5), t("nan_to_num")(copy, 0.5))
                    and t("equal")(t("isnan")(now), t("isnan")(copy))))
        else:
            same = value.shape == copy.shape and value.dtype == copy.dtype and value.tobytes() == copy.tobytes()
        if not same:
            out.append(key)
    return {key: encode(before[key][0]) for key in out} if in_place else out
