"""Runtime integrity check: what the grader still takes from the kernel is what it was when the kernel started.

Verdicts are decided on the grader's side (verdicts.py): a patch in the kernel cannot change a comparison. Two
things the grader does still take from the kernel's own code, inside each request: `cu.forbid` (course_utils.checks:
torch function and dispatch modes that refuse the operators an exercise asks students to build) and the memory a
call allocated (course_utils.memory's and course_utils.allocations' ledgers, and the profiler that watches the other
threads meanwhile: in_kernel/watch.py). A kernel that rewrites them could use a forbidden operator or hide an
allocation and still pass. This check is how the grader sees such a rewrite: it flags it for review
(`integrity: ...`), the points stay as the tests gave them.

The grader (GradingExecute, preprocessors/execute.py) sends the kernel, right after it starts and before any
notebook cell, a silent request (no history, no output, its answer in the execute reply's `user_expressions`) that
records a descriptor of every watched object: its id, its type, and for Python functions a digest of the code and
defaults and the ids of the functions it calls through its module globals. After each graded test cell it asks again
and compares, in its own process. Watched:

- every function and class of course_utils, and every method, property and private helper each class defines
  (TensorMemory's ledger, forbid's modes);
- torch's mode machinery: the function- and dispatch-mode stacks and the Mode base classes;
- builtins, the numpy and torch comparison, reduction and attention functions, and torch.Tensor's comparison and
  conversion methods: no verdict depends on them any more, but replacing them is an attempt worth seeing;
- the names the source notebook imports (`cu`, `np`, `F`, ...): they must still be the modules;
- IPython's execution path: run_cell, run_code, showtraceback, input and AST transformers, the compiler, custom
  exception handlers, and trace/profile hooks.

What it need not see: code that leaves these objects alone and works around them (a forbidden operator run in a
thread, a process or a custom op, or between torch's disable guards). Inside a grading kernel, forbid also replaces
the operator's kernels in PyTorch's dispatcher for every thread and refuses new processes for the call's duration
(course_utils.refusals.forbidden_in_every_thread), and the static `escape` flag (flags/code.py) names such code.

A hostile kernel runs in the same process as the check, so it can always fake an answer; the design makes that
deliberate work: the check's code is sent fresh each time, runs with the built-ins C made (transport.with_c_builtins:
a `__builtins__` dict subclass gets no answer), writes with `repr` and digests with `hash` (no json or hashlib to
patch), echoes a random token per request, and is compared with the kernel's answer before any student code ran.
"""
import ast
import secrets

from .. import cells
from ..cell_code import parse  # a cell's AST as IPython runs it; None when it does not parse
from .transport import c_made_builtins, with_c_builtins

BUILTINS = ("abs all any bool callable compile dict enumerate eval exec float getattr hasattr id int isinstance "
            "issubclass iter len list max min next range repr round setattr sorted str sum tuple type zip "
            "__import__ __build_class__ AssertionError Exception").split()
WATCHED = [f"builtins.{name}" for name in BUILTINS] + [
    f"math.{n}" for n in "isclose isfinite isnan fabs".split()] + [
    f"numpy.{n}" for n in ("allclose isclose array_equal array_equiv all any abs absolute max min sum mean equal "
                           "not_equal less greater isfinite isnan asarray array argmax argsort round ndarray "
                           "linalg.norm testing.assert_allclose testing.assert_array_equal testing.assert_equal "
                           "testing.assert_array_almost_equal testing.assert_almost_equal").split()] + [
    f"torch.{n}" for n in ("allclose isclose equal all any abs max min sum mean eq ne lt gt le ge isfinite isnan "
                           "argmax softmax log_softmax matmul bmm einsum tensor as_tensor is_tensor manual_seed "
                           "testing.assert_close Tensor nn.functional.scaled_dot_product_attention "
                           "nn.functional.softmax nn.functional.multi_head_attention_forward nn.functional.linear "
                           "nn.Module.__call__ nn.Module._call_impl nn.Module.parameters nn.Module.state_dict "
                           "nn.MultiheadAttention.forward nn.Linear.forward nn.Embedding.forward").split()] + [
    f"torch.Tensor.{n}" for n in ("__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __float__ __int__ __index__ "
                                  "__len__ __abs__ __sub__ __getitem__ __array__ item tolist float double detach "
                                  "numpy allclose equal all any abs max min sum eq isfinite shape dtype size dim "
                                  "__torch_function__").split()] + [
    f"IPython.core.interactiveshell.InteractiveShell.{n}" for n in (
        "run_cell run_cell_async run_ast_nodes run_code showtraceback user_expressions transform_cell "
        "transform_ast").split()] + [
    "torch._C._push_on_torch_function_stack", "torch._C._pop_torch_function_stack",
    "torch._C._len_torch_function_stack", "torch._C._get_function_stack_at", "torch._C._set_torch_function_mode",
    "torch.overrides.TorchFunctionMode.__enter__", "torch.overrides.TorchFunctionMode.__exit__",
    "torch.overrides._get_current_function_mode_stack", "torch.utils._python_dispatch.TorchDispatchMode.__enter__",
    "torch.utils._python_dispatch.TorchDispatchMode.__exit__", "torch.utils._python_dispatch._push_mode",
    "torch.utils._python_dispatch._pop_mode", "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
    "torch._C._push_on_torch_dispatch_stack", "torch._C._pop_torch_dispatch_stack",
    "torch._C._len_torch_dispatch_stack",
    # forbid's refusals in every thread (course_utils.refusals.forbidden_in_every_thread): PyTorch's dispatcher
    "torch.library.Library.__init__", "torch.library.Library.impl", "torch.library.Library._destroy",
    "torch._C._dispatch_get_all_op_names", "torch._C._dispatch_has_kernel_for_dispatch_key",
    # a memory measurement's watch on every thread (in_kernel/watch.py): PyTorch's profiler
    "torch.autograd.profiler.profile.__enter__", "torch.autograd.profiler.profile.__exit__",
    "torch.autograd.profiler.record_function.__enter__",
    "torch.autograd.profiler.record_function.__exit__", "torch._C._profiler._ExperimentalConfig",
    "torch.autograd.profiler.profile._parse_kineto_results", "sys.addaudithook", "sys.setprofile", "sys.getprofile",
    "threading.setprofile", "torch.Tensor.numel",
    # the entry of the grader's requests (transport.kernel_expression), and the context managers forbid's refusals are
    "marshal.loads", "binascii.a2b_base64", "binascii.b2a_base64", "importlib.util.MAGIC_NUMBER",
    "contextlib._GeneratorContextManager.__enter__", "contextlib._GeneratorContextManager.__exit__",
    "ipykernel.zmqshell.ZMQInteractiveShell._showtraceback", "ipykernel.ipkernel.IPythonKernel.do_execute",
    "ipykernel.kernelbase.Kernel.execute_request", "IPython.core.compilerop.CachingCompiler.__call__",
    "IPython.core.compilerop.CachingCompiler.ast_parse", "ipykernel.kernelbase.Kernel.get_parent",  # a sealed answer
    "jupyter_client.session.Session.send", "jupyter_client.session.Session.serialize"]
IMPORTS = ["marshal", "binascii", "importlib.util", "contextlib", "numpy", "numpy.testing", "numpy.linalg", "torch", "torch.testing", "torch.nn", "torch.nn.functional",
           "torch.overrides", "torch.utils._python_dispatch", "torch.library", "math", "course_utils", "course_utils.memory", "course_utils.allocations", "torch.autograd.profiler", "IPython.core.interactiveshell", "IPython.core.compilerop", "ipykernel.zmqshell",
           "ipykernel.ipkernel", "ipykernel.kernelbase", "jupyter_client.session"]
MAX_ANSWER_CHARS = 8 * 2**20  # the check's answer is a few hundred kilobytes
WATCHED_PACKAGE = "course_utils"  # every function and class it defines is watched

# Runs in the kernel, in a fresh namespace (nothing a cell can shadow); reads SPEC, NONCE, MODE; writes OUT.
KERNEL_CODE = r'''
import builtins, importlib, sys

FunctionType, BuiltinFunctionType, ModuleType = type(lambda: 0), type(len), type(sys)  # (`types` a cell can change)
CodeType, MethodType = type((lambda: 0).__code__), type(type("M", (), {"m": lambda self: 0})().m)
spec = SPEC
MEMBER_DUNDERS = ("__init__", "__call__", "__enter__", "__exit__", "__torch_function__", "__torch_dispatch__")
if MODE == "baseline":
    for name in spec["imports"]:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    package = spec["package"]
    for modname in sorted(m for m in list(sys.modules) if m == package or m.startswith(package + ".")):
        module = sys.modules[modname]
        for attr, value in sorted(vars(module).items()):
            if not attr.startswith("__") and isinstance(value, (type, FunctionType)) \
                    and (getattr(value, "__module__", None) or "").split(".")[0] == package:
                spec["paths"].append(modname + "." + attr)
                if isinstance(value, type):  # its own methods and helpers: the ledger's _count, a mode's hooks
                    for member, v in sorted(vars(value).items()):
                        if isinstance(v, (FunctionType, staticmethod, classmethod, property)) and \
                                (not member.startswith("__") or member in MEMBER_DUNDERS):
                            spec["paths"].append(modname + "." + attr + "." + member)


def resolve(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        obj = sys.modules.get(".".join(parts[:i]))
        if obj is not None:
            break
    else:
        return None, "not imported"
    for name in parts[i:]:
        if isinstance(obj, type):
            for klass in obj.__mro__:
                if name in vars(klass):
                    obj = vars(klass)[name]
                    break
            else:
                return None, "missing"
        elif isinstance(obj, ModuleType) and name in vars(obj):
            obj = vars(obj)[name]
        else:
            return None, "missing"
    return obj, None


def plain(value):
    return value if isinstance(value, (int, float, str, bool, type(None))) else "id%d" % id(value)


def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from codes(const)


def code_text(code):
    """What a code object does, as text (marshal's output depends on reference counts)."""
    parts = [code.co_code.hex(), repr(code.co_names), repr(code.co_varnames), repr(code.co_freevars),
             repr((code.co_flags, code.co_argcount, code.co_kwonlyargcount))]
    for const in code.co_consts:
        parts.append(code_text(const) if isinstance(const, CodeType) else
                     repr(const) if isinstance(const, (int, float, complex, str, bytes, tuple, frozenset, type(None)))
                     else type(const).__name__)
    return "|".join(parts)


def describe(obj):
    kind = type(obj)
    d = {"id": id(obj), "type": kind.__module__ + "." + kind.__qualname__}
    try:
        d["name"] = "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", "?"))
    except Exception:
        d["name"] = "?"
    f = obj.fget if isinstance(obj, property) else obj
    f = f.__func__ if isinstance(f, (staticmethod, classmethod, MethodType)) else f
    if isinstance(f, FunctionType):
        d["code"] = hash((code_text(f.__code__), repr([plain(v) for v in (f.__defaults__ or ())]),
                          repr(sorted((k, plain(v)) for k, v in (f.__kwdefaults__ or {}).items()))))
        calls = {}
        for code in codes(f.__code__):
            for n in code.co_names:
                v = f.__globals__.get(n)
                if v is not None and (isinstance(v, (FunctionType, BuiltinFunctionType, type,
                                                     ModuleType))):
                    calls[n] = id(v)
        for n, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                if callable(cell.cell_contents):
                    calls["closure:" + n] = id(cell.cell_contents)
            except ValueError:
                pass
        d["calls"] = calls
        wrapped = getattr(f, "__dict__", {}).get("__wrapped__")
        if wrapped is not None:  # a library's own decorator (torch._dynamo re-wraps torch.manual_seed on import)
            d["wrapped"], d["file"] = id(wrapped), f.__code__.co_filename
    return d


objects = {}
for path in spec["paths"]:
    obj, missing = resolve(path)
    objects[path] = {"missing": missing} if missing else describe(obj)

ip = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
shell = {}
if ip is not None:
    shell["overrides"] = sorted(n for n in spec["shell_methods"] if n in vars(ip))
    shell["kernel_overrides"] = sorted(n for n in spec["kernel_methods"] if n in vars(getattr(ip, "kernel", None) or object()))
    for n in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
        shell[n] = [id(t) for t in getattr(ip, n, [])]
    shell["compile"] = [id(ip.compile), type(ip.compile).__qualname__]  # flags: `from __future__` changes them
    shell["input_transformer_manager"] = id(getattr(ip, "input_transformer_manager", None))
    shell["custom_exceptions"] = repr(ip.custom_exceptions)
    user_ns = ip.user_ns
    names = {}
    for name, path in spec["names"].items():
        if name in user_ns:
            obj, missing = resolve(path)
            if not missing:
                names[name] = user_ns[name] is obj
    shell["names"] = names
    shell["shadowed"] = sorted(n for n in spec["builtins"] if n in user_ns and callable(user_ns[n])
                               and user_ns[n] is not vars(builtins).get(n))
shell["trace"] = [sys.gettrace() is not None, sys.getprofile() is not None,
                  getattr(sys.modules.get("threading"), "_trace_hook", None) is not None,
                  getattr(sys.modules.get("threading"), "_profile_hook", None) is not None]
roots = {}
for path in spec["paths"]:
    root = sys.modules.get(path.split(".")[0])
    if getattr(root, "__file__", None):
        roots[path.split(".")[0]] = root.__file__.rsplit("/", 1)[0] + "/"
OUT = repr({"nonce": NONCE, "paths": spec["paths"], "objects": objects, "shell": shell, "roots": roots})
'''

CHECK_BUILTINS = c_made_builtins(compile(KERNEL_CODE, "<integrity>", "exec"))  # as C made them, or the answer is:
TAMPERED = "the kernel's built-ins were not what C made (`__builtins__` or builtins replaced): the check did not run"
SHELL_METHODS = ("run_cell", "run_cell_async", "run_ast_nodes", "run_code", "showtraceback", "_showtraceback",
                 "user_expressions", "transform_cell", "transform_ast", "ev", "ex", "compile")
KERNEL_METHODS = ("do_execute", "execute_request", "send_response", "get_parent")


class Watch:
    """The grader's side: builds the requests and compares the kernel's answers with the first one."""

    def __init__(self, source_nb=None):
        self.names = imported_names(source_nb) if source_nb is not None else {}
        used = builtins_used_by_tests(source_nb) if source_nb is not None else set()
        self.builtins = sorted(used | {"exec", "__import__"})  # the check itself runs through these
        self.baseline = None

    def request(self, mode):
        """(nonce, expression) to send as a user expression."""
        nonce = secrets.token_hex(16)
        paths = self.baseline["paths"] if self.baseline else list(WATCHED)
        spec = dict(paths=paths, imports=IMPORTS, package=WATCHED_PACKAGE, names=self.names, builtins=self.builtins,
                    shell_methods=SHELL_METHODS, kernel_methods=KERNEL_METHODS)
        ns = dict(CODE=KERNEL_CODE, SPEC=spec, NONCE=nonce, MODE=mode)
        body = f"(lambda d: (B['exec'](d['CODE'], d), d['OUT'])[1])({{**{ns!r}, '__builtins__': B}})"
        return nonce, with_c_builtins(body, CHECK_BUILTINS, TAMPERED)

    def parse(self, nonce, reply):
        """The kernel's answer as a dict; raises ValueError when the reply is not a genuine answer."""
        content = (reply or {}).get("content", {})
        value = content.get("user_expressions", {}).get("check", {})
        if value.get("status") != "ok":
            raise ValueError(f"the check failed in the kernel: {value.get('ename', '')}: {value.get('evalue', '')}"[:300]
                             if value else "no answer from the kernel")
        text = value.get("data", {}).get("text/plain")
        if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
            raise ValueError("no answer, or an answer too large")
        try:
            answer = ast.literal_eval(text)
            answer = ast.literal_eval(answer) if answer != TAMPERED else answer
        except (KeyError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
            raise ValueError(f"an unreadable answer ({type(e).__name__})") from None
        if type(answer) is not dict or answer.get("nonce") != nonce:
            raise ValueError(TAMPERED if answer == TAMPERED else
                             "an answer without this request's token (not produced by the grader's check)")
        return answer

    def _library_wrapper(self, path, before, now):
        """The library's own code now wraps the very object the baseline saw (functools.wraps, in its package)."""
        root = self.baseline.get("roots", {}).get(path.split(".")[0])
        return bool(root) and now.get("wrapped") == before.get("id") and now.get("file", "").startswith(root)

    def changes(self, answer):
        """What differs from the baseline, as short sentences naming the object."""
        base, now = self.baseline, answer
        found = []
        for path in base["paths"]:
            b, n = base["objects"].get(path, {}), now["objects"].get(path, {})
            if "missing" in b:
                continue
            if "missing" in n:
                found.append(f"{path} was deleted")
            elif n.get("id") != b.get("id"):
                if not self._library_wrapper(path, b, n):
                    found.append(f"{path} was replaced (now {n.get('type')} {n.get('name')})")
            elif n.get("code") != b.get("code"):
                found.append(f"{path} had its code or defaults changed")
            else:
                swapped = sorted(k for k, v in b.get("calls", {}).items() if n.get("calls", {}).get(k) != v)
                if swapped:
                    found.append(f"{path}: what it calls was replaced ({', '.join(swapped[:5])})")
        bs, ns = base["shell"], now["shell"]
        for key, what in [("overrides", "the IPython shell's methods were overridden"),
                          ("kernel_overrides", "the kernel's methods were overridden"),
                          ("input_transformers_cleanup", "an IPython input transformer was added or removed"),
                          ("input_transformers_post", "an IPython input transformer was added or removed"),
                          ("ast_transformers", "an IPython AST transformer was added or removed"),
                          ("compile", "the IPython compiler was replaced"),
                          ("input_transformer_manager", "the IPython input transformer manager was replaced"),
                          ("custom_exceptions", "a custom exception handler was set (set_custom_exc)"),
                          ("trace", "a trace or profile function was set (sys.settrace / setprofile)")]:
            if bs.get(key) != ns.get(key):
                found.append(what + (f": {', '.join(ns[key])}" if key.endswith("overrides") and ns.get(key) else ""))
        found += [f"the notebook's name `{name}` no longer refers to {self.names[name]}"
                  for name, same in sorted(ns.get("names", {}).items()) if not same]
        found += [f"the notebook defines its own `{name}`, shadowing the built-in the tests call"
                  for name in ns.get("shadowed", [])]
        return list(dict.fromkeys(found))


def imported_names(source_nb):
    """{name: dotted path} bound by the imports of the source notebook's provided and test cells."""
    names = {}
    for cell in source_nb.cells:
        if cell.cell_type != "code" or cells.is_answer(cell):
            continue
        tree = parse(cell.source)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                for a in node.names:
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name != "*"})
    return names


def builtins_used_by_tests(source_nb):
    """Built-in names the source notebook's test cells call or read."""
    import builtins
    used = set()
    for cell in source_nb.cells:
        if cells.is_test(cell):
            tree = parse(cell.source)
            used |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and hasattr(builtins, n.id)} if tree else set()
    return used

