"""The kernel's side, part 6: one request served, its answer written.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define (tests/autograder/test_modules.py checks)."""
def _grads(fn, args, kwargs, grad_output):
    import course_utils.charged_once as charged_once
    return charged_once.local_call_with_grads(fn, *args, grad_output=grad_output, **kwargs)


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


def serve(request, namespace, ask_grader=None, seal=None):
    """Answer one request (pickled bytes) against `namespace` (the notebook's globals); returns JSON text.

    ask_grader(question text) -> answer text: how a lent object asks the grader (None: nothing can be lent).
    seal(answer text): how the answer leaves the kernel before the request ends (_sealer; None: only returned)."""
    _LENDING["ask"], _LENDING["answer"] = ask_grader, lambda nested: _serve(nested, namespace)
    try:
        return _serve(request, namespace, seal)
    finally:
        _LENDING["ask"], _LENDING["answer"] = None, None


def _serve(request, namespace, seal=None):
    try:
        op, target, args, kwargs, forbidden, meters, in_place, stand_ins, only = _load(request, Lent)
    except Tampered:
        return _sent(TAMPERED, seal)
    except Exception as e:  # noqa: BLE001: the grader sent what this kernel cannot read: the grader's problem
        return _sent(_json({"ok": False, "grader": f"the kernel could not read the request ({_type(e).__name__})"}),
                     seal)
    everywhere = _Stack()  # the refusal in every thread: open until the answer has left the kernel (sealed)
    try:
        try:
            held = _refusing_everywhere(everywhere, forbidden) if op != "get" else ()
            answer = _answer(op, target, args, kwargs, (forbidden, only), meters, in_place, stand_ins, namespace, held)
        except BaseException as e:  # noqa: BLE001: the student's error is reported as its kind only
            answer = _error(e)
        return _sent(_written(answer), seal)
    finally:
        try:
            everywhere.close()
        except BaseException:  # noqa: BLE001: the answer has left; what a refusal's exit raises changes nothing
            pass


def _written(answer):
    """The answer's JSON text, within MAX_ANSWER_BYTES."""
    try:
        text = _json(answer)
    except BaseException:  # noqa: BLE001: an answer this code cannot write is the student's doing (a patched meter)
        return '{"ok": false, "error": "Exception"}'
    return text if len(text) <= MAX_ANSWER_BYTES else '{"ok": false, "error": "TooLarge"}'


def _sent(text, seal):
    if seal is not None:
        seal(text)
    return text


TAMPERED = '{"ok": false, "error": "Tampered"}'
SEALED = '{"op":"sealed","text":'  # how a sealed answer's prompt begins (_json writes no spaces)


def _sealer(kernel):
    """seal(text): send the answer on Jupyter's stdin channel as an input request that awaits no reply, or None
    outside a Jupyter kernel. It is sent by this code before the request ends, while the request's refusal still
    holds, so nothing that runs after it (IPython's formatters, the expression's repr, the execute reply's
    assembly) changes what the grader reads. Its parts are taken now, before any of the student's code runs."""
    session = getattr(kernel, "session", None)
    if session is None:
        return None
    send, socket = session.send, kernel.stdin_socket
    parent, ident = kernel.get_parent("shell"), kernel._parent_ident["shell"]

    def seal(text):
        send(socket, "input_request", {"prompt": SEALED + _json(text) + "}", "password": False}, parent, ident=ident)

    return seal


def _answer(op, target, args, kwargs, refusals, meters, in_place, stand_ins, namespace, held=()):
    """Run the request against the notebook's namespace: the answer as plain data (raises the student's error).
    held: the refusal in every thread the request entered (_refusing_everywhere), checked still open after the call."""
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
                held = held + _forbidding(call, refusals, held)
                measured = _measuring(call, meters)
                if op == "call":
                    value = obj(*args, **kwargs)
                else:  # args: (call args, call kwargs, grad_output)
                    value = _grads(obj, args[0], args[1], args[2])
                _still_refusing(held)
            except BaseException as e:  # noqa: BLE001: left as a with statement leaves, then raised
                call.close(e)
            call.close()
            changed = _changed(before, in_place)
        else:
            obj = _table()[target]
            call = _Stack()
            try:
                held = held + _forbidding(call, refusals, held)
                value = _other(op, obj, args)
                _still_refusing(held)
            except BaseException as e:  # noqa: BLE001
                call.close(e)
            call.close()
    except BaseException as e:  # noqa: BLE001
        stack.close(e)
    finally:
        sys.stdout, sys.stderr = streams
    stack.close()
    return {"ok": True, "value": encode(value, Lent), "changed": changed, **_measurements(measured)}


def _error(e):
    """A failed request's answer: the kind of the student's error (an allow-listed name), never its text.

    Read with care: the error is the student's object, and a property that raises while it is read is still
    the student's error, never the grader's (whose failures only the grader decides)."""
    try:
        kind = _type(e)
        if kind is TooLarge or kind is Tampered or kind is Unrefused:
            return {"ok": False, "error": kind.__name__}
        checks = sys.modules.get("course_utils.checks")
        if checks is not None and kind is getattr(checks, "ForbiddenCall", None):
            used = BaseException.__getattribute__(e, "__dict__").get("forbidden")
            return {"ok": False, "error": "ForbiddenCall", "forbidden": used if _type(used) is str else None}
        for klass in _type.__dict__["__mro__"].__get__(kind):
            name = _type.__dict__["__name__"].__get__(klass)
            if name in BUILTIN_ERRORS and _ERROR_CLASSES[name] is klass:
                return {"ok": False, "error": name, **_crash_category(e)}
    except BaseException:  # noqa: BLE001
        pass
    return {"ok": False, "error": "Exception"}


# What a crash was, by the words of torch's and numpy's own messages: a code from this closed set and at most
# eight small numbers (the shapes it names) cross to the grader, which writes its own sentence for the code
# (session.CRASHES); no text of the student's crosses.
CRASH_WORDS = (
    ("bmm", ("for first two dimensions of batch2", "mismatch in its core dimension", "size mismatch, got input")),
    ("matmul", ("shapes cannot be multiplied",)),
    ("broadcast", ("must match the size of tensor",)),
    ("shapes", ("could not be broadcast", "is not broadcastable", "expanded size of the tensor")),
    ("view", ("view size is not compatible", "use .reshape")),
    ("reshape", ("is invalid for input of size", "cannot reshape array")),
    ("truth", ("Boolean value of Tensor with more than", "truth value of an array with more than")),
    ("sorted", ("must be sorted in decreasing order",)),
    ("dim", ("Dimension out of range", "out of bounds for array of dimension", "dimension specified as")),
    ("index", ("out of bounds", "index out of range")),
    ("dtype", ("expected scalar type", "same dtype", "did not match", "can't be cast to the desired output")),
    ("device", ("to be on the same device",)),
    ("inplace", ("modified by an inplace operation",)),
    ("twice", ("backward through the graph a second time",)),
    ("gradcount", ("incorrect number of gradients", "invalid gradient at index")),
    ("nograd", ("does not require grad", "does not have a grad_fn", "does not depend on the inputs or parameters")),
    ("numpy", ("numpy() on Tensor that requires grad",)),
    ("unpack", ("values to unpack",)),
    ("none", ("'NoneType' object",)),
    ("permute", ("number of dims don't match in permute", "does not match the length of the desired ordering")),
    ("cat", ("must match except in dimension",)),
    ("indices", ("too many indices",)),
    ("belowlaunch", ("interpreter's executor directly, below a launch",)),  # (launch.py's own refusal)
)


def _crash_category(e):
    """{"category": code, "numbers": [...]} for a student's error whose message torch or numpy wrote, else {}."""
    try:
        text = BaseException.__str__(e)
        if _type(text) is not str:
            return {}
        text = text[:2000]
        for code, words in CRASH_WORDS:
            for word in words:
                if word in text:
                    return {"category": code, "numbers": _numbers(text)}
    except BaseException:  # noqa: BLE001: no category is an answer too
        pass
    return {}


def _numbers(text):
    """The first eight numbers of a message that follow no letter (mat1's 1 is not one; 6x8 is two), each below 10^9."""
    numbers, digits, after_word, previous = [], "", False, " "
    for char in text + " ":
        if "0" <= char <= "9":
            if not after_word:
                digits += char
            previous = char
            continue
        if digits and len(digits) < 10:
            numbers.append(int(digits))
        if len(numbers) == 8:
            break
        digits = ""
        times = char == "x" and "0" <= previous <= "9" and not after_word  # the x of 6x8
        after_word = (char.isalpha() or char == "_") and not times
        previous = char
    return numbers


def handle_request(b64_request):
    """Entry point in the kernel: the answer's JSON text, sent sealed on the stdin channel first (_sealer). The
    notebook's namespace is IPython's user namespace."""
    ipython = sys.modules.get("IPython")  # not builtins' get_ipython: IPython puts it there only while a cell runs
    shell = ipython.get_ipython() if ipython is not None else None
    namespace = shell.user_ns if shell is not None else vars(sys.modules["__main__"])
    kernel = getattr(shell, "kernel", None)
    seal = _sealer(kernel)
    _LENDING["in_kernel"] = True
    try:
        return serve(_b64decode(b64_request), namespace, getattr(kernel, "raw_input", None), seal)
    except Tampered:
        return _sent(TAMPERED, seal)
    finally:
        _LENDING["in_kernel"] = False
