"""Verdicts decided on the grader's side: a test cell never runs in the student's kernel.

A graded test cell (its visible and its hidden part) is taken from the lesson's source notebook
and executed here, in the grading process, with this process's own numpy, torch and
course_utils. Its namespace holds what the source notebook's `grader-setup` cells define (run
here once, in order) and the import statements of the source's other ready-made cells. Every
other name the test reads (the student's answers, the notebook's variables) is fetched from the
kernel through `kernel_rpc`: plain data (tensors, arrays, numbers, strings and containers of
them) arrives as a copy, anything else as a `Remote` handle whose calls, attributes, len(),
iteration and indexing are requests to the kernel. Arguments travel by value (cloudpickle),
handles by id; tensors and arrays changed in place by the student's code are copied back.

So the student's code runs only inside those requests, and the comparisons, the reference
values and the hidden test's source stay here: nothing patched in the kernel takes part in a
comparison, and the kernel's history never holds a hidden test. What the student's code prints
or raises is not passed on: a failed request becomes a message written here ("softmax raised
ValueError"). What remains in the kernel is `cu.forbid`: the forbidden operators are refused
inside the request by torch's function and dispatch modes (see course_utils.checks.forbid).
"""
import ast
import base64
import builtins
import contextlib
import io
import json
import time
from pathlib import Path

import numpy as np

from . import cells

SETUP_TAG = "grader-setup"
MAX_ANSWER_CHARS = 96 * 2**20
DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64",
          "complex128"}
TORCH_ONLY = {"bfloat16"}
STUB = (Path(__file__).with_name("kernel_rpc.py")).read_text()
_BUILTIN_ERRORS = {name: getattr(builtins, name) for name in
                   "ArithmeticError AssertionError AttributeError IndexError KeyError LookupError NameError "
                   "NotImplementedError OverflowError RecursionError RuntimeError StopIteration TypeError "
                   "ValueError ZeroDivisionError MemoryError".split()}


class GraderSideError(Exception):
    """The grader could not ask the kernel (no answer, a malformed answer): never the student's verdict."""


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


# ------------------------------------------------------------------ the conversation with the kernel

def _pickle(request):
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def persistent_id(self, obj):
            return ("h", object.__getattribute__(obj, "_id")) if type(obj) is Remote else None

    out = io.BytesIO()
    Pickler(out, protocol=4).dump(request)
    return out.getvalue()


def _decode(value, session, label, depth=0):
    """A kernel answer as plain values built here; anything unexpected is a GraderSideError."""
    import torch
    if depth > 25:
        raise GraderSideError("answer nested too deeply")
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is not dict or "t" not in value:
        raise GraderSideError(f"malformed answer {type(value).__name__}")
    kind = value["t"]
    if kind == "none":
        return None
    if kind == "int":
        return int(str(value["v"])[:5000])
    if kind == "float":
        return float(str(value["v"])[:100])
    if kind in ("tensor", "ndarray", "npscalar"):
        dtype = str(value["dtype"])
        if dtype not in DTYPES:
            raise GraderSideError(f"unexpected dtype {dtype!r}")
        raw = base64.b64decode(str(value["b64"]), validate=True)
        shape = [] if kind == "npscalar" else [int(s) for s in value["shape"]]
        if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize != len(raw):
            raise GraderSideError("an array's shape does not match its bytes")
        array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if kind == "npscalar":
            return array[()]
        if kind == "ndarray":
            return array
        tensor = torch.from_numpy(array)
        original = str(value.get("as", dtype))
        if original != dtype:
            if original not in DTYPES | TORCH_ONLY:
                raise GraderSideError(f"unexpected dtype {original!r}")
            tensor = tensor.to(getattr(torch, original))
        return tensor
    if kind == "dtype":
        name = str(value["v"])
        if name not in DTYPES | TORCH_ONLY:
            raise GraderSideError(f"unexpected dtype {name!r}")
        return getattr(torch, name)
    if kind in ("tuple", "list"):
        items = [_decode(v, session, f"{label}[{i}]", depth + 1) for i, v in enumerate(value["items"])]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        out = {}
        for k, v in value["items"]:
            key = _decode(k, session, label, depth + 1)
            if type(key) not in (str, int):
                raise GraderSideError("a dict key that is not a str or int")
            out[key] = _decode(v, session, f"{label}[{key!r}]", depth + 1)
        return out
    if kind == "handle":
        return Remote(session, int(value["id"]), label)
    raise GraderSideError(f"unknown answer kind {kind!r}")


def _copy_back(original, changed):
    """Mirror an in-place change the student's code made to a tensor or array argument."""
    import torch
    if isinstance(original, torch.Tensor) and isinstance(changed, torch.Tensor):
        if original.shape == changed.shape and original.dtype == changed.dtype:
            with torch.no_grad(), contextlib.suppress(RuntimeError):  # (an expanded view cannot be written)
                original.copy_(changed)
    elif type(original) is np.ndarray and type(changed) is np.ndarray:
        if original.shape == changed.shape and original.dtype == changed.dtype and original.flags.writeable:
            np.copyto(original, changed)


class Session:
    """One kernel's conversation: `transport(bytes) -> answer text`."""

    def __init__(self, transport):
        self.transport = transport
        self.requests = 0

    def ask(self, op, target, args, kwargs, label):
        from course_utils.checks import ForbiddenCall, forbidden_now
        forbidden = forbidden_now()
        payload = _pickle((op, target, tuple(args), dict(kwargs), forbidden))
        self.requests += 1
        text = self.transport(payload)
        if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
            raise GraderSideError("no answer, or an answer too large")
        try:
            answer = json.loads(text)
        except ValueError:
            raise GraderSideError("an answer that is not JSON") from None
        if type(answer) is not dict:
            raise GraderSideError("an answer that is not a JSON object")
        if not answer.get("ok"):
            kind = str(answer.get("error"))
            name = label if op != "get" else target
            if kind == "ForbiddenCall":
                used = answer.get("forbidden")
                used = used if used in forbidden else (forbidden[0] if forbidden else "a forbidden operator")
                raise ForbiddenCall(f"{name} called {used}, which this exercise asks you to build yourself.")
            if op == "get" and kind == "NameError":
                raise NameError(f"name {target!r} is not defined in your notebook: run the cell that defines it, "
                                "and keep the name the exercise gives")
            if kind == "TooLarge":
                raise AssertionError(f"{name} returned more data than the grader accepts")
            error = _BUILTIN_ERRORS.get(kind, RuntimeError)
            hint = " (the exercise is not done yet?)" if kind == "NotImplementedError" else ""
            raise error(f"{name} raised {kind}{hint}; run this test cell in your notebook to see the details")
        value = _decode(answer.get("value"), self, label)
        for key, changed in (answer.get("mirror") or {}).items():
            index = int(key) if key.isdigit() else key
            source = args[index] if isinstance(index, int) and index < len(args) else kwargs.get(index)
            _copy_back(source, _decode(changed, self, label))
        return value

    def fetch(self, name):
        return self.ask("get", name, (), {}, name)


def in_process_transport(namespace):
    """A transport that serves requests from a namespace in this process (tests and the mistakes data)."""
    stub = {"__name__": "__autograder_rpc__"}
    exec(compile(STUB, "<kernel_rpc>", "exec"), stub)
    return lambda payload: stub["serve"](payload, namespace)


def kernel_code(payload):
    """The silent cell that answers one request in the kernel (its result is read through user_expressions)."""
    stub = base64.b64encode(STUB.encode()).decode()
    request = base64.b64encode(payload).decode()
    return ("(lambda ns: (exec(compile(__import__('base64').b64decode(%r).decode(), '<autograder>', 'exec'), ns), "
            "ns['handle_request'](%r)))({'__name__': '__autograder_rpc__'})" % (stub, request))


# pops the answer, so that a request whose answer was never set cannot be read as the one before it
ANSWER_EXPRESSION = "__import__('sys').modules['__autograder_handles__'].__dict__.pop('answer', None)"


# ------------------------------------------------------------------ a notebook's tests

def _code(source):
    """A cell's source with IPython magics and shell lines blanked (they mean nothing here)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _bound_names(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def free_names(source):
    """Names a cell reads and never binds itself (builtins excluded)."""
    tree = ast.parse(_code(source))
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - _bound_names(tree) - set(dir(builtins))


def _top_level_names(source):
    try:
        tree = ast.parse(_code(source))
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        names |= _bound_names(ast.Module(body=[node], type_ignores=[])) if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else {node.name}
    return names


is_test_cell = cells.is_test


class LessonTests:
    """The trusted half of a lesson: its set-up, its test cells by grade_id, the names students define."""

    def __init__(self, source_nb):
        code = [c for c in source_nb.cells if c.get("cell_type") == "code" and c.get("id") != "colab-setup"]
        self.tests = {cells.grade_id(c): c.source for c in code if is_test_cell(c)}
        self.answer_names = set().union(*[_top_level_names(c.source) for c in code if cells.is_answer(c)])
        setup = []
        for c in code:
            if SETUP_TAG in c.get("metadata", {}).get("tags", []):
                setup.append(_code(c.source))
            elif not cells.is_answer(c) and not is_test_cell(c):
                try:
                    tree = ast.parse(_code(c.source))
                except SyntaxError:
                    continue
                setup += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        self.setup = "\n".join(setup)

    def runner(self, session):
        return TestRunner(self, session)


class TestRunner:
    """Runs a lesson's test cells here, one at a time, against one student's kernel."""
    __test__ = False

    def __init__(self, lesson, session):
        self.lesson, self.session = lesson, session
        self.namespace = None
        self.defined = set()

    def _start(self):
        self.namespace = {"__name__": "__grader_test__", "__builtins__": builtins}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(self.lesson.setup, "<grader-setup>", "exec"), self.namespace)
        self.defined = set(self.namespace)

    def run(self, grade_id):
        """Run test cell `grade_id`; returns (stdout text, exception or None)."""
        if self.namespace is None:
            self._start()
        source = self.lesson.tests[grade_id]
        out = io.StringIO()
        try:
            for name in sorted(free_names(source)):
                if name in self.lesson.answer_names or name not in self.defined:
                    try:
                        self.namespace[name] = self.session.fetch(name)
                    except NameError:
                        self.namespace.pop(name, None)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(_code(source), f"<test {grade_id}>", "exec"), self.namespace)
            error = None
        except GraderSideError:
            raise
        except Exception as e:  # noqa: BLE001: the test failed; its message is the verdict's reason
            error = e
        finally:
            self.defined |= _bound_names(ast.parse(_code(source)))
        return out.getvalue(), error


def outputs_for(stdout, error):
    """nbformat outputs for a test cell run here: what the test printed, and its error (no traceback lines)."""
    from nbformat.v4 import new_output
    outputs = [new_output("stream", name="stdout", text=stdout)] if stdout else []
    if error is not None:
        ename, evalue = type(error).__name__, str(error)[:2000]
        outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))
    return outputs


# ------------------------------------------------------------------ asking a Jupyter kernel

def kernel_transport(kc, get_shell_msg, deadline, on_timeout=None, is_alive=None):
    """A transport over a jupyter KernelClient: one silent execute per request.

    get_shell_msg(timeout): the next shell message (raises queue.Empty); deadline(): the monotonic
    time by which the answer must come (the cell's timeout); past it, `on_timeout()` (interrupt
    the kernel) is called and TimeoutError raised; `is_alive()` False raises DeadKernelError.
    """
    from queue import Empty

    def transport(payload):
        msg_id = kc.execute(kernel_code(payload), silent=True, store_history=False,
                            user_expressions={"answer": ANSWER_EXPRESSION}, allow_stdin=False, stop_on_error=False)
        limit, interrupted = deadline(), False
        while True:
            try:
                msg = get_shell_msg(timeout=0.1)
            except Empty:
                if is_alive is not None and not is_alive():
                    from nbclient.exceptions import DeadKernelError
                    raise DeadKernelError("the kernel died while the student's code ran") from None
                if time.monotonic() > limit:
                    if interrupted:
                        raise TimeoutError("your code did not finish within the cell's time limit") from None
                    interrupted = True
                    if on_timeout is not None:
                        on_timeout()
                    limit = time.monotonic() + 10
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if interrupted:
                raise TimeoutError("your code did not finish within the cell's time limit")
            found = msg.get("content", {}).get("user_expressions", {}).get("answer", {})
            text = found.get("data", {}).get("text/plain") if found.get("status") == "ok" else None
            answer = None
            if isinstance(text, str) and len(text) <= MAX_ANSWER_CHARS + 16:
                try:
                    answer = ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    pass
            return answer if isinstance(answer, str) else json.dumps({"ok": False, "error": "Exception"})

    return transport


# ------------------------------------------------------------------ python -m autograder.verdicts check NN

def check_lesson(notebook_path, log=print):
    """Run a solution notebook in this process, its test cells the grader's way; returns {grade_id: error or None}.

    The answers and ready-made cells run in a namespace of their own (standing in for the kernel)
    and every test cell runs through a Session, as in grading: a quick check that a lesson's
    tests follow the rules of grader-side tests (see the module docstring).
    """
    import os
    import re
    import nbformat
    os.environ.setdefault("COURSE_FAST", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    nb = nbformat.read(str(notebook_path), as_version=4)
    kernel = {"__name__": "__main__"}
    runner = LessonTests(nb).runner(Session(in_process_transport(kernel)))
    results = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.get("id") == "colab-setup":
            continue
        if is_test_cell(cell):
            grade_id = cells.grade_id(cell)
            _, error = runner.run(grade_id)
            results[grade_id] = error
            log(f"{grade_id}: " + ("passed" if error is None else f"FAILED {type(error).__name__}: {str(error)[:400]}"))
            continue
        source = re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n", "", _code(cell.source))
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(source, "<cell>", "exec"), kernel)
        except Exception as e:  # noqa: BLE001: reported, the run goes on as a notebook's would
            log(f"  (a ready-made or answer cell raised {type(e).__name__}: {str(e)[:200]})")
    return results


def main(argv=None):
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="python -m autograder.verdicts",
                                     description="check that a lesson's test cells pass when run on the grader's side")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("lessons", nargs="+", help="lesson numbers or notebook paths (e.g. 03)")
    args = parser.parse_args(argv)
    solutions = Path(__file__).resolve().parent.parent / "solutions"
    failed = 0
    for lesson in args.lessons:
        path = Path(lesson) if lesson.endswith(".ipynb") else next(solutions.glob(f"{lesson}_*.ipynb"))
        print(f"== {path.name}")
        failed += sum(e is not None for e in check_lesson(path).values())
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
