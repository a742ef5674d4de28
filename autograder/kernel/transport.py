"""The transport: one request to the kernel and its answer, over Jupyter or in this process.

A transport is a function `(bytes, answer_callback) -> answer text`: over a Jupyter kernel (kernel_transport)
in grading, or in this process (in_process_transport) for tests and `python -m autograder check`. It calls
answer_callback(question, converse) for each question the kernel asks while the request runs, where
converse(reply) sends a reply and returns the kernel's next prompt. Over Jupyter, a request is one silent
execute whose user expression (kernel_expression) runs the kernel's side (in_kernel/), and the questions are
input requests on the stdin channel, read in one place (`_next_input_request`)."""
import ast
import base64
import builtins
import importlib.util
import json
import marshal
import pickle
import time
import types

from . import in_kernel
from .wire import MAX_ESCAPED_CHARS, MAX_SEALED_CHARS, GraderSideError, NoAnswer

STUB = in_kernel.SOURCE  # the kernel's side, one program


def in_process_transport(namespace):
    """A transport that serves requests from a namespace in this process (tests and the mistakes data)."""
    stub = {"__name__": "__autograder_rpc__"}
    exec(in_kernel.CODE, stub)  # noqa: S102: the kernel's side, in a fresh namespace as in a kernel

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
    return _ENTRY % dict(names=_STUB_BUILTINS, tampered=in_kernel.TAMPERED, compiled=_STUB_COMPILED,
                         magic=importlib.util.MAGIC_NUMBER, source=_STUB_SOURCE, request=request)


# T is `type` and F the built-in function type, both reached from literals; g(value, name) keeps a value only
# if C made it as that name (a function, or a class of builtins: BaseException swapped for ZeroDivisionError is not
# BaseException); B the stub's built-ins; m, a, c: marshal.loads, binascii.a2b_base64, compile
_C_MADE = ("(lambda v, n: v if ((T(v) is F and v.__name__ == n) or (T(v) is T and "
           "T.__dict__['__flags__'].__get__(v) & 256 and T.__dict__['__name__'].__get__(v) == n and "
           "T.__dict__['__module__'].__get__(v) == 'builtins')) else None)")
# where the names are looked up: `__builtins__` as an exact dict, or a module (an immutable C type named module); a
# dict subclass (whose look-ups its own code answers) or any other object gives none
_BUILTINS_OF = ("(b.get(n) if T(b) is {}.__class__ else b.__dict__.get(n) if "
                "T.__dict__['__flags__'].__get__(T(b)) & 256 and T.__dict__['__name__'].__get__(T(b)) == 'module' "
                "else None)")


_ENTRY = (
    "(lambda T, F, b: (lambda g: (lambda B: %(tampered)r if None in B.values() else "
    "(lambda m, a: %(tampered)r if m is None or a is None else "
    "(lambda ns: (B['exec'](m(a(%(compiled)r)) if B['__import__']('importlib.util').util.MAGIC_NUMBER == %(magic)r "
    "else B['compile'](a(%(source)r).decode(), '<autograder>', 'exec'), ns), ns['handle_request'](%(request)r))[1])"
    "({'__name__': '__autograder_rpc__', '__builtins__': B}))"
    "(g(B['__import__']('marshal').__dict__.get('loads'), 'loads'), "
    "g(B['__import__']('binascii').__dict__.get('a2b_base64'), 'a2b_base64')))"
    "({n: g(" + _BUILTINS_OF + ", n) for n in %(names)r}))"
    "(" + _C_MADE + "))((0).__class__.__class__, (0).__class__.__class__([].append), __builtins__)")


def with_c_builtins(body, names, tampered):
    """An expression that evaluates `body` (an expression that may use B, {name: built-in}) with B holding the
    built-ins `names` as C made them, taken from the kernel's `__builtins__` (an exact dict or a module), or is
    `tampered` when any of them is not: what the integrity check runs through (integrity.Watch.request)."""
    return ("(lambda T, F, b: (lambda g: (lambda B: " + repr(tampered) + " if None in B.values() else " + body + ")"
            "({n: g(" + _BUILTINS_OF + ", n) for n in " + repr(tuple(names)) + "}))(" + _C_MADE + "))"
            "((0).__class__.__class__, (0).__class__.__class__([].append), __builtins__)")


def c_made_builtins(code):
    """The built-in names a code object uses that C made under that name (the functions and classes a kernel's
    `__builtins__` must hold as they are)."""
    return tuple(sorted(n for n in _builtins_used(code) if isinstance(vars(builtins)[n], type) or
                        (type(vars(builtins)[n]) is types.BuiltinFunctionType and vars(builtins)[n].__name__ == n)))


def _builtins_used(code):
    """The built-in names a code object and the code inside it use (plus those Python's own opcodes look up)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _builtins_used(const)
    return {n for n in names if n in vars(builtins)} | {"__build_class__", "__import__", "exec", "compile"}


# The stub as this interpreter's bytecode (unmarshalled in about 0.3 ms, where compiling takes 5), used by
# a kernel whose Python reads the same bytecode, and as source for any other.
_STUB_CODE = in_kernel.CODE
_STUB_SOURCE = base64.b64encode(STUB.encode()).decode()
_STUB_COMPILED = base64.b64encode(marshal.dumps(_STUB_CODE)).decode()
_STUB_BUILTINS = c_made_builtins(_STUB_CODE)


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


def _prompt(get_stdin_msg, msg_id, timeout):
    """The prompt of the next message on the stdin channel if it is request msg_id's input request, NO_PROMPT when
    none came within `timeout` s or it was another's (the one place the stdin channel is read)."""
    from queue import Empty
    try:
        msg = get_stdin_msg(timeout=timeout)
    except Empty:
        return NO_PROMPT
    if msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "input_request":
        return msg.get("content", {}).get("prompt")
    return NO_PROMPT


NO_PROMPT = object()


def kernel_transport(kc, get_shell_msg, deadline, on_timeout=None, is_alive=None, get_stdin_msg=None):
    """A transport over a jupyter KernelClient: one silent execute per request (silent_request).

    A question about a lent object comes as an input_request on the stdin channel
    (get_stdin_msg(timeout), raises queue.Empty), and its answer goes back as the input_reply. With a stdin
    channel the answer is the one the kernel's side sent there, sealed, before the request ended (in_kernel's
    _sealer): what a kernel shows as the expression's value (IPython's formatters, its execution machinery) is
    never read, and a reply without exactly one sealed answer is a NoAnswer (the kernel's doing, never the
    grader's: wire.KernelRefused). Without one, the value of the expression is the answer, as before.
    """
    def transport(payload, answer_callback):
        sealed = []

        def questions(msg_id):
            def converse(reply):
                """Send `reply` to the kernel's question; the kernel's next prompt (this request's)."""
                kc.input(reply)
                while (prompt := _prompt(get_stdin_msg, msg_id, 0.05)) is NO_PROMPT:
                    if is_alive is not None and not is_alive():
                        from nbclient.exceptions import DeadKernelError
                        raise DeadKernelError("the kernel died while the student's code ran") from None
                    if time.monotonic() > deadline():
                        raise TimeoutError("your code did not finish within the cell's time limit") from None
                return prompt

            asked = False
            while (prompt := _prompt(get_stdin_msg, msg_id, 0)) is not NO_PROMPT:
                if _sealed_text(prompt) is not None:  # the answer: sent from inside the request, awaits no reply
                    sealed.append(_sealed_text(prompt))
                    continue
                kc.input(answer_callback(prompt, converse))
                asked = True
            return asked

        reply = silent_request(kc, get_shell_msg, "", {"answer": kernel_expression(payload)}, deadline,
                               on_timeout, is_alive, questions if get_stdin_msg is not None else None)
        if get_stdin_msg is not None:
            return _sealed_answer(reply, sealed, get_stdin_msg, deadline)
        text, answer = expression_text(reply, "answer", MAX_ESCAPED_CHARS + 16), None  # (a repr escapes some)
        if text is not None:
            answer = _literal(text)
        if not isinstance(answer, str):  # no answer set, or not one we can read: never the student's error
            raise GraderSideError("the kernel gave no readable answer to the grader's request")
        return answer

    return transport


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _sealed_text(prompt):
    """The answer a stdin prompt carries if it is a sealed answer (in_kernel.SEALED), else None."""
    if not isinstance(prompt, str) or not prompt.startswith(in_kernel.SEALED) or len(prompt) > MAX_SEALED_CHARS:
        return None
    try:
        message = json.loads(prompt)
    except ValueError:
        return None
    return message.get("text") if type(message) is dict and isinstance(message.get("text"), str) else None


SEAL_WAIT = 10  # seconds a sealed answer may trail the execute reply (it was sent first, on another channel)


def _sealed_answer(reply, sealed, get_stdin_msg, deadline):
    """The request's answer: its one sealed answer, the kernel's own "Tampered" (the entry refused to run: it says
    so itself, unsealed), else a NoAnswer saying what the kernel did instead."""
    msg_id = reply.get("parent_header", {}).get("msg_id")
    end = min(time.monotonic() + SEAL_WAIT, max(deadline(), time.monotonic() + 1))
    while True:
        prompt = _prompt(get_stdin_msg, msg_id, 0 if sealed else min(0.05, max(0.0, end - time.monotonic())))
        if prompt is not NO_PROMPT and _sealed_text(prompt) is not None:
            sealed.append(_sealed_text(prompt))
        elif sealed or time.monotonic() >= end:
            break
    if len(sealed) == 1:
        return sealed[0]
    if sealed:
        return NoAnswer(f"got {len(sealed)} answers from your kernel, one of them not from the grader's code")
    found = reply.get("content", {}).get("user_expressions", {}).get("answer", {})
    text = expression_text(reply, "answer", MAX_ESCAPED_CHARS + 16)
    if text is not None and _literal(text) == in_kernel.TAMPERED:
        return in_kernel.TAMPERED
    if found.get("status") == "error":
        ename = str(found.get("ename", ""))
        ename = ename if ename.isidentifier() and len(ename) <= 60 else "an error"
        return NoAnswer(f"raised {ename} in your kernel before it could answer")
    if text is None:
        return NoAnswer("got no answer from your kernel")
    return NoAnswer("got an answer that the grader's code in your kernel did not send (something after it made "
                    "or rewrote the answer)")
