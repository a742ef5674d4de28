"""The kernel's side, part 3: an answer as plain data, and which arguments a call changed in place.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
names the other parts define."""
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
