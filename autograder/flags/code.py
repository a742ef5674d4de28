"""The rules on the student's code: patch, eq, lie, helper, reach, introspect, kernel (see the package's
docstring), over every cell and the code a cell passes as a string to eval/exec/compile."""
import ast
import re

from .. import cells
from ..job import Finding
from .history import history_reads, module_bindings
from .introspect import introspection
from .syntax import bound_names, parse, root_name

WATCHED_MODULES = {"numpy", "torch", "builtins", "course_utils"}
DEFAULT_ALIASES = {"np": "numpy", "numpy": "numpy", "torch": "torch", "builtins": "builtins",
                   "__builtins__": "builtins", "course_utils": "course_utils"}
# the grader's files, as paths: `solutions` and `.git` only as a path component ("my solutions" is prose)
GRADER_FILES = re.compile(r"gradebook|(?:^|[/\\])(?:solutions|\.git)(?:[/\\]|$)|hidden[ _]tests|nbgrader|autograded"
                          r"|submitted/", re.IGNORECASE)
CODE_RUNNERS = {"eval", "exec", "compile", "ev", "ex", "run_cell", "run_code", "run_source"}
KERNEL_ATTRIBUTES = {"displayhook", "display_pub", "iopub_socket", "send_response", "shell_handlers",
                     "ast_transformers", "input_transformers_cleanup", "input_transformers_post", "set_custom_exc",
                     "showtraceback", "_showtraceback", "run_cell", "run_code", "excepthook", "settrace", "setprofile",
                     # what can replay or rewrite a result after the test's call returned: output formatters,
                     # audit hooks (they see every request), and Python's built-ins table itself
                     "display_formatter", "formatters", "for_type", "for_type_by_name", "addaudithook",
                     "__builtins__", "mimebundle_formatter", "ipython_display_formatter", "type_printers",
                     "deferred_printers", "singleton_printers", "user_expressions", "payload_manager",
                     # how the kernel's side sends a sealed answer (the stdin channel's parts)
                     "stdin_socket", "_input_request", "_parent_ident"}
# IPython's execution events: a callback registered there runs around every request, outside the test's call
IPYTHON_EVENTS = {"pre_execute", "post_execute", "pre_run_cell", "post_run_cell"}
DICT_LOOKUPS = {"__getitem__", "__missing__", "get", "__contains__"}  # a dict subclass whose look-ups run its code
# methods that change a container in place: called on an object reached through numpy, torch or course_utils
# (cu.refusals' tables, say) they change what the tests rely on as data, where no assignment shows
MUTATORS = {"clear", "pop", "popitem", "update", "append", "extend", "remove", "insert", "setdefault", "discard",
            "__setitem__", "__delitem__"}
VALUE_TYPES = {"float", "int", "complex", "bool", "Tensor", "ndarray", "Parameter", "generic", "float64", "float32"}
# what runs work where the graded call's watch (cu.forbid's torch modes, the memory count, both per
# thread and per process) does not reach: another thread or process, a custom operator, the mode stack off
ESCAPE_MODULES = {"threading", "_thread", "concurrent", "multiprocessing", "subprocess", "torch.multiprocessing",
                  "torch.library", "ctypes", "_ctypes"}
NATIVE_MEMORY = {"ctypes", "_ctypes", "ctypeslib"}  # as a name or an attribute too: sys.modules['ctypes'], a.ctypes
ESCAPE_NAMES = {"DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
                "_disable_current_modes", "_pop_torch_function_stack", "_pop_mode", "_pop_mode_temporarily",
                "_set_torch_function_mode", "_len_torch_function_stack", "_get_function_stack_at",
                "_push_on_torch_function_stack", "custom_op", "fork", "forkpty", "spawnv", "spawnl", "posix_spawn",
                "system", "popen", "Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "start_new_thread",
                # PyTorch's dispatcher registrations below torch.library (a refusal's kernels replaced or reset)
                "_dispatch_library", "_dispatch_dump_table",
                # Triton's interpreter, where lesson 11's count of a kernel's loads and stores is taken
                "InterpreterBuilder", "interpreter_builder", "GridExecutor", "InterpretedFunction"}
COMPARISON_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__", "__abs__",
                      "__sub__", "__rsub__", "__array__", "__array_ufunc__", "__torch_function__", "__instancecheck__",
                      "__index__", "__int__", "__len__", "__getattribute__"}


def _module_aliases(trees):
    aliases = dict(DEFAULT_ALIASES)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and _module_reached(node.value):
                aliases[node.targets[0].id] = _module_reached(node.value)  # t = sys.modules['course_utils.refusals']
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in WATCHED_MODULES:
                        aliases[a.asname or a.name.split(".")[0]] = a.name
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in WATCHED_MODULES:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _module_reached(node):
    """The watched module an expression reaches as data, or None: `sys.modules['course_utils.refusals']`,
    `importlib.import_module('numpy')` or `__import__('torch')`, at the root of an attribute or item chain."""
    while isinstance(node, (ast.Attribute, ast.Subscript)) and not (
            isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "modules"):
        node = node.value
    name = None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        name = node.slice.value
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and (
            getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) == "__import__"):
        name = node.args[0].value
    return name if isinstance(name, str) and name.split(".")[0] in WATCHED_MODULES else None


def _always_true(fn):
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant)
            and body[0].value.value is True)


def test_helpers(source_nb):
    """Names the tests rely on: imported from course_utils anywhere, or defined in locked cells.

    An exercise's own answer is never a helper, even where a test cell defines a reference
    version of it for a while (to grade the next exercise on its own).
    """
    names, answers = set(), set()
    for cell in source_nb.cells:
        tree = cell.cell_type == "code" and cells.is_answer(cell) and parse(cell.source)
        for node in tree.body if tree else []:
            answers.update(bound_names(node))
    for cell in source_nb.cells:
        tree = cell.cell_type == "code" and parse(cell.source)
        if not tree:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils"):
                names.update(a.asname or a.name for a in node.names if a.name != "*")
        if cells.nbgrader(cell).get("locked") and not cells.is_answer(cell):
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
    return names - answers


def _code_in_strings(tree):
    """Code a cell hands to eval/exec/compile (or IPython's ev/ex/run_cell) as a constant string, parsed."""
    found = []
    for node in ast.walk(tree):
        name = getattr(node, "func", None) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
        if isinstance(node, ast.Call) and name in CODE_RUNNERS and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            inner = parse(node.args[0].value)
            if inner is not None:
                found.append((inner, f" (in the code passed to {name} on line {node.lineno})"))
                found += [(t, f"{where} (in the code passed to {name} on line {node.lineno})")
                          for t, where in _code_in_strings(inner)]
    return found


def _node_flags(node, watched):
    """The flags one syntax node raises (watched(node): the watched module an expression reaches, or None)."""
    found = []
    targets = []
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    for t in targets:
        if isinstance(t, (ast.Attribute, ast.Subscript)) and watched(t):
            found.append(Finding("patch", f"line {node.lineno} changes {ast.unparse(t)} ({watched(t)})"))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr") and node.args and watched(node.args[0])):
        found.append(Finding("patch", f"line {node.lineno} calls {node.func.id} on {ast.unparse(node.args[0])}"))
    found += _data_patches(node, watched)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__eq__" \
            and _always_true(node):
        found.append(Finding("eq", f"line {node.lineno} defines __eq__ that always returns True"))
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__eq__"
                                            for t in node.targets) \
            and isinstance(node.value, ast.Lambda) and isinstance(node.value.body, ast.Constant) \
            and node.value.body.value is True:
        found.append(Finding("eq", f"line {node.lineno} sets __eq__ to a lambda that always returns True"))
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and GRADER_FILES.search(node.value):
        found.append(Finding("reach", f"line {node.lineno} names grader files: {node.value[:60]!r}"))
    if isinstance(node, ast.ClassDef) and _lying_class(node):
        found.append(Finding("lie", f"line {node.lineno} class {node.name} subclasses {_lying_class(node)} and "
                     f"redefines how it compares or converts"))
    what = _kernel_reach(node)
    if what:
        found.append(Finding("kernel", f"line {node.lineno} {what} (the kernel's own messaging and execution "
                     f"machinery, which can fake or hide a test's result)"))
    what = _escape(node)
    if what:
        found.append(Finding("escape", f"line {node.lineno} {what} (work done there is out of the graded call's "
                     f"watch: a forbidden operator or a large allocation would not be seen)"))
    what = introspection(node)
    if what:
        found.append(Finding("introspect", f"line {node.lineno} {what} (reads the running cell's source or the "
                     f"call stack, where the hidden tests are)"))
    return found


def code_flags(code_cells, helpers=frozenset()):
    """Flags (`Finding`s) for a list of student code strings."""
    parsed = [t for t in map(parse, code_cells) if t is not None]
    trees = [(t, "", i) for i, t in enumerate(parsed)]
    trees += [(found, where, i) for i, t in enumerate(parsed) for found, where in _code_in_strings(t)]
    aliases = _module_aliases([t for t, _, _ in trees])
    watched = lambda node: aliases.get(root_name(node) or "") or _module_reached(node)  # noqa: E731
    flags, tops = [], module_bindings(parsed)
    anywhere = {name for top in tops for name in top}
    before = [set()]  # names bound at the top level of the cells before each cell
    for top in tops:
        before.append(before[-1] | set(top))
    for tree, where, cell in trees:
        count = len(flags)
        for line, name in history_reads(tree, before[cell], anywhere):
            flags.append(Finding("introspect", f"line {line} reads IPython's history ({name}, where the hidden tests are)"))
        for node in ast.walk(tree):
            flags += _node_flags(node, watched)
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                    isinstance(node, ast.Assign) and _module_reached(node.value)):
                for name in set(bound_names(node)) & set(aliases):
                    flags.append(Finding("patch", f"line {node.lineno} rebinds {name} ({aliases[name]})"))
            for name in set(bound_names(node)) & set(helpers):
                if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils")):
                    flags.append(Finding("helper", f"line {node.lineno} redefines test helper {name}"))
        flags[count:] = [Finding(f.kind, f.text + where) for f in flags[count:]]
    return flags


def _data_patches(node, watched):
    """Changes no assignment shows: object.__setattr__ (past a class's own guard), a container of numpy, torch or
    course_utils emptied or filled in place, Python's built-ins table named as a string."""
    func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__") \
            and isinstance(func.value, ast.Name) and func.value.id in ("object", "type"):
        return [Finding("patch", f"line {node.lineno} calls {func.value.id}.{func.attr} (sets an attribute past "
                        f"the object's own guard)")]
    if isinstance(func, ast.Attribute) and func.attr in MUTATORS and isinstance(func.value, ast.Attribute) \
            and watched(func.value):
        return [Finding("patch", f"line {node.lineno} changes {ast.unparse(func.value)} in place (.{func.attr})")]
    if isinstance(node, ast.Constant) and node.value == "__builtins__":
        return [Finding("kernel", f"line {node.lineno} names '__builtins__' (Python's built-ins table)")]
    return []


def _kernel_reach(node):
    """What a node does to reach the kernel's machinery (KERNEL_ATTRIBUTES, by attribute or by name in getattr and
    its kin; IPython's events; a dict whose look-ups run its own code, as Python's built-ins table can), or None."""
    if isinstance(node, ast.Attribute) and node.attr in KERNEL_ATTRIBUTES:
        return f"uses .{node.attr}"
    named = isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr") \
        and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value
    if named in KERNEL_ATTRIBUTES:
        return f"names {named!r}"
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("register", "unregister") \
            and getattr(node.func.value, "attr", None) == "events":
        return f"registers a callback on IPython's events (.events.{node.func.attr})"
    if isinstance(node, ast.Constant) and node.value in IPYTHON_EVENTS:
        return f"names IPython's {node.value!r} event"
    if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", None)) in ("dict", "UserDict")
                                              for b in node.bases):
        defined = {n for stmt in node.body for n in bound_names(stmt)} & DICT_LOOKUPS
        return f"defines a dict whose look-ups run its own code ({', '.join(sorted(defined))})" if defined else None
    return None


def _escape(node):
    """What a node does to run work outside the graded call's thread, process or torch modes, or None."""
    if isinstance(node, ast.Import):
        hit = [a.name for a in node.names if a.name in ESCAPE_MODULES or a.name.split(".")[0] in ESCAPE_MODULES]
        return f"imports {hit[0]}" if hit else None
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if module in ESCAPE_MODULES or module.split(".")[0] in ESCAPE_MODULES:
            return f"imports from {module}"
        hit = [a.name for a in node.names
               if a.name in ESCAPE_NAMES | NATIVE_MEMORY or f"{module}.{a.name}" in ESCAPE_MODULES]
        return f"imports {hit[0]} from {module}" if hit else None
    if isinstance(node, ast.Attribute) and node.attr in ESCAPE_NAMES | NATIVE_MEMORY:
        return f"uses .{node.attr}"
    if isinstance(node, ast.Constant) and node.value in NATIVE_MEMORY:
        return f"names {node.value!r} (native code and raw memory)"
    if isinstance(node, ast.Attribute) and node.attr == "library" and root_name(node) == "torch":
        return "uses torch.library (a custom operator)"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__" \
            and node.args and isinstance(node.args[0], ast.Constant) \
            and str(node.args[0].value).split(".")[0] in ESCAPE_MODULES:
        return f"imports {node.args[0].value}"
    return None


def _lying_class(node):
    """The value type a class subclasses while redefining comparison or conversion (a lying answer), or None."""
    bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None) for b in node.bases]
    base = next((b for b in bases if b in VALUE_TYPES), None)
    defined = set()
    for stmt in node.body:
        defined |= set(bound_names(stmt))
    return base if base and defined & COMPARISON_DUNDERS else None
