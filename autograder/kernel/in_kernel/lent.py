"""The kernel's side, part 3: what a test lends, as stand-ins whose every use is a question to the grader.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define (tests/autograder/test_modules.py checks)."""
# this request's way to ask the grader (ask(question text) -> reply text) and to serve the requests a reply carries
# (answer(request bytes) -> answer text, serve.serve's): None once the request is over
_LENDING = {"ask": None, "answer": None, "in_kernel": False}


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
    question = _json({"op": op, "id": lent._number, "args": encode(list(args), Lent),
                      "kwargs": encode(dict(kwargs or {}), Lent)})
    kind, value = _load(_b64decode(ask(question)), Lent)
    while kind == "request":  # the lent object uses this notebook's objects: serve that, then ask again
        answer = _json({"op": "answer", "text": _LENDING["answer"](value)})
        kind, value = _load(_b64decode(ask(answer)), Lent)
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
