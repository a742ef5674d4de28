"""Static checks that flag a submission for manual review.

A flag never changes a score: it tells the instructor to look. The checks read the code
the student wrote (every code cell that is not a verbatim copy of a cell of the source
notebook) and the notebook's structure against the source:

- `patch`: assigns, deletes or setattr()s an attribute of numpy, torch, builtins or
  course_utils (or anything imported from them), e.g. `np.allclose = lambda *a: True`;
- `eq`: defines `__eq__` that always returns True;
- `lie`: subclasses float, int, torch.Tensor or numpy.ndarray and redefines comparison or
  conversion (the tests refuse such answers: cu.plain_float/plain_tensor/plain_array);
- `helper`: redefines a name the tests use (imported from course_utils or defined in a
  locked cell), e.g. `def check_close(*a): pass`;
- `reach`: names the grader's files in a string (gradebook, `solutions` or `.git` as a path component,
  hidden tests, nbgrader's folders), shell escapes (`!cat ...`) and `%%bash` cells included;
- `introspect`: reads the running cell's source or walks the call stack (`inspect`,
  `sys._getframe`, frame attributes, `linecache`, `traceback`, `gc.get_objects`/`get_referrers`,
  IPython's history `In`/`_ih`/`_i<n>` and the magics that replay it, `%history`, `%recall`, ...),
  which is where the hidden tests are while they run. A history name the student's own code binds in
  that scope (`for _i in range(3)`) is their variable, not the history (see `_history_reads`).

Cells are read as IPython runs them (`x = %history`, `!cmd` and magics become the calls they are),
and code passed as a constant string to eval/exec/compile is checked like a cell.
- `kernel`: reaches the kernel's own machinery (displayhook, AST/input transformers,
  showtraceback, custom exception handlers, trace hooks), which can fake or hide a result;
- `structure`: a test cell deleted, edited, duplicated or turned into Markdown (or raw) (nbgrader
  restores edited and converted cells and grades them; a deleted test cell scores zero).
"""
import ast
import re

WATCHED_MODULES = {"numpy", "torch", "builtins", "course_utils"}
DEFAULT_ALIASES = {"np": "numpy", "numpy": "numpy", "torch": "torch", "builtins": "builtins",
                   "__builtins__": "builtins", "course_utils": "course_utils"}
# the grader's files, as paths: `solutions` and `.git` only as a path component ("my solutions" is prose)
GRADER_FILES = re.compile(r"gradebook|(?:^|[/\\])(?:solutions|\.git)(?:[/\\]|$)|hidden[ _]tests|nbgrader|autograded"
                          r"|submitted/", re.IGNORECASE)


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _sources(nb):
    return [c.source for c in nb.cells if c.cell_type == "code"]


PYTHON_CELL_MAGICS = {"capture", "time", "timeit", "prun", "debug", "python", "python3", "pypy", "writefile", "file"}


def _python(code):
    """The Python that IPython runs for a cell: magics, shell escapes and `x = %magic` lines as the calls
    they become (`get_ipython().run_line_magic('history', '')`), so that nothing hides in IPython syntax.

    The body of a cell magic that holds Python (`%%capture`, `%%time`, `%%writefile x.py`) is kept as
    code, after a line naming the magic; any other body (`%%bash`) is the string IPython passes it as.
    """
    lines = code.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%") \
            and (lines[first].lstrip()[2:].split() or [""])[0] in PYTHON_CELL_MAGICS:
        name = lines[first].lstrip()[2:].split(maxsplit=1)
        call = f"get_ipython().run_cell_magic({(name or [''])[0]!r}, '', '')"
        return "\n".join(lines[:first] + [call] + [_python(chr(10).join(lines[first + 1:]))])
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(code)
    except Exception:  # noqa: BLE001: without IPython, blank what it would have transformed
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _parse(code):
    """AST of a cell as IPython runs it (see _python); None when it does not parse.

    A cell magic whose body is not Python (`%%bash`, `%%html`) is read as IPython runs it: one call
    with the body as a string, which the string checks (`reach:`) still see."""
    for text in (lambda: _python(code), lambda: _ipython_only(code)):
        try:
            return ast.parse(text())
        except (SyntaxError, ValueError):
            continue
    return None


def _ipython_only(code):
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(code)


def _module_aliases(trees):
    aliases = dict(DEFAULT_ALIASES)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in WATCHED_MODULES:
                        aliases[a.asname or a.name.split(".")[0]] = a.name
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in WATCHED_MODULES:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _always_true(fn):
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant)
            and body[0].value.value is True)


def _bound_names(node):
    """Names a statement binds at top level: def, class, assignment targets, imports."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
    names, todo = [], list(targets)
    while todo:  # plain names only: `a, (b, *c) = ...`, not the `cu` of `cu.x = ...`
        t = todo.pop()
        if isinstance(t, ast.Name):
            names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            todo += t.elts
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
    return names


def test_helpers(source_nb):
    """Names the tests rely on: imported from course_utils anywhere, or defined in locked cells.

    An exercise's own answer is never a helper, even where a test cell defines a reference
    version of it for a while (to grade the next exercise on its own).
    """
    names, answers = set(), set()
    for cell in source_nb.cells:
        tree = cell.cell_type == "code" and nbgrader_meta(cell).get("solution") and _parse(cell.source)
        for node in tree.body if tree else []:
            answers.update(_bound_names(node))
    for cell in source_nb.cells:
        tree = cell.cell_type == "code" and _parse(cell.source)
        if not tree:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils"):
                names.update(a.asname or a.name for a in node.names if a.name != "*")
        if nbgrader_meta(cell).get("locked") and not nbgrader_meta(cell).get("solution"):
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
            inner = _parse(node.args[0].value)
            if inner is not None:
                found.append((inner, f" (in the code passed to {name} on line {node.lineno})"))
                found += [(t, f"{where} (in the code passed to {name} on line {node.lineno})")
                          for t, where in _code_in_strings(inner)]
    return found


def code_flags(code_cells, helpers=frozenset()):
    """Flags for a list of student code strings."""
    cells = [t for t in map(_parse, code_cells) if t is not None]
    trees = [(t, "", i) for i, t in enumerate(cells)]
    trees += [(found, where, i) for i, t in enumerate(cells) for found, where in _code_in_strings(t)]
    aliases = _module_aliases([t for t, _, _ in trees])
    watched = lambda node: aliases.get(_root_name(node) or "")  # noqa: E731
    flags, tops = [], _module_bindings(cells)
    anywhere = {name for top in tops for name in top}
    before = [set()]  # names bound at the top level of the cells before each cell
    for top in tops:
        before.append(before[-1] | set(top))
    for tree, where, cell in trees:
        count = len(flags)
        for line, name in _history_reads(tree, before[cell], anywhere):
            flags.append(f"introspect: line {line} reads IPython's history ({name}, where the hidden tests are)")
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, (ast.Attribute, ast.Subscript)) and watched(t):
                    flags.append(f"patch: line {node.lineno} changes {ast.unparse(t)} ({watched(t)})")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("setattr", "delattr") and node.args and watched(node.args[0])):
                flags.append(f"patch: line {node.lineno} calls {node.func.id} on {ast.unparse(node.args[0])}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__eq__" \
                    and _always_true(node):
                flags.append(f"eq: line {node.lineno} defines __eq__ that always returns True")
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__eq__"
                                                    for t in node.targets) \
                    and isinstance(node.value, ast.Lambda) and isinstance(node.value.body, ast.Constant) \
                    and node.value.body.value is True:
                flags.append(f"eq: line {node.lineno} sets __eq__ to a lambda that always returns True")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and GRADER_FILES.search(node.value):
                flags.append(f"reach: line {node.lineno} names grader files: {node.value[:60]!r}")
            if isinstance(node, ast.ClassDef) and _lying_class(node):
                flags.append(f"lie: line {node.lineno} class {node.name} subclasses {_lying_class(node)} and "
                             f"redefines how it compares or converts")
            if isinstance(node, ast.Attribute) and node.attr in KERNEL_ATTRIBUTES:
                flags.append(f"kernel: line {node.lineno} uses .{node.attr} (the kernel's own messaging and "
                             f"execution machinery, which can fake or hide a test's result)")
            what = _introspection(node)
            if what:
                flags.append(f"introspect: line {node.lineno} {what} (reads the running cell's source or the "
                             f"call stack, where the hidden tests are)")
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in set(_bound_names(node)) & set(aliases):
                    flags.append(f"patch: line {node.lineno} rebinds {name} ({aliases[name]})")
            for name in set(_bound_names(node)) & set(helpers):
                if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils")):
                    flags.append(f"helper: line {node.lineno} redefines test helper {name}")
        flags[count:] = [f + where for f in flags[count:]]
    return flags


# `gc` is not here: gc.collect() is how notebooks free memory; its readers (get_objects, ...) are attributes below
INTROSPECTION_MODULES = {"inspect", "linecache", "traceback", "dis", "tokenize"}
INTROSPECTION_ATTRIBUTES = {"_getframe", "_current_frames", "f_back", "f_code", "f_globals", "f_locals", "f_lineno",
                            "tb_frame", "tb_next", "gi_frame", "cr_frame", "history_manager", "currentframe",
                            "getsource", "getsourcelines", "getframeinfo", "getouterframes", "getinnerframes",
                            "get_referrers", "get_referents", "get_objects", "co_consts", "__traceback__"}
# IPython magics that read or replay the input history (the hidden tests' source, once they ran), or show the
# source of an object (`f??` is %pinfo2: a function a test cell defined)
HISTORY_MAGICS = {"history", "hist", "recall", "rep", "rerun", "save", "macro", "notebook", "pastebin", "load",
                  "edit", "pinfo2", "psource", "pfile"}
MAGIC_CALLS = {"run_line_magic", "run_cell_magic", "magic", "find_line_magic", "find_cell_magic", "find_magic"}
CODE_RUNNERS = {"eval", "exec", "compile", "ev", "ex", "run_cell", "run_code", "run_source"}
NAMESPACES = {"user_ns", "user_global_ns", "__dict__"}  # where IPython keeps the history names
KERNEL_ATTRIBUTES = {"displayhook", "display_pub", "iopub_socket", "send_response", "shell_handlers",
                     "ast_transformers", "input_transformers_cleanup", "input_transformers_post", "set_custom_exc",
                     "showtraceback", "_showtraceback", "run_cell", "run_code", "excepthook", "settrace", "setprofile"}
HISTORY_NAMES = re.compile(r"^(In|Out|_ih|_oh|_i{1,3}|_i\d+|_dh)$")
REBOUND_EACH_CELL = re.compile(r"^(_i{1,3}|_i\d+)$")  # IPython sets these again before every cell it runs


# ---------------------------------------------------------------- history names: IPython's, or the student's own?
#
# `In`, `_ih`, `_i`, ... are IPython's input history only where the name is not the student's own variable:
# `for _i in range(3): print(_i)` reads a loop counter. A read is the student's own when its scope binds the
# name (a function's local or parameter, a comprehension's variable, a closure over an enclosing function's
# local), or, at the top level of a cell (and in a class body), when the same cell bound it earlier. IPython
# sets `_i`, `_ii`, `_iii` and `_i<n>` again before every cell, so a binding in an earlier cell, or a global
# read from inside a function, still reads the history; `In`, `Out`, `_ih`, `_oh`, `_dh` are set once, so a
# student's own top-level binding of them, in any cell before, makes them theirs.

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = _FUNCTIONS + _COMPREHENSIONS + (ast.ClassDef,)


def _inner(scope):
    """The parts of a scope evaluated inside it."""
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(scope.body)
    parts = [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
    for i, g in enumerate(scope.generators):
        parts += [g.target, *([g.iter] if i else []), *g.ifs]
    return parts


def _outer(scope):
    """The parts of a nested scope evaluated where it is defined: decorators, defaults, bases, first iterable."""
    if isinstance(scope, _FUNCTIONS):
        a = scope.args
        return [*getattr(scope, "decorator_list", []), *a.defaults, *[d for d in a.kw_defaults if d]]
    if isinstance(scope, ast.ClassDef):
        return [*scope.decorator_list, *scope.bases, *[k.value for k in scope.keywords]]
    return [scope.generators[0].iter]


def _scope_nodes(scope):
    """Every node evaluated in `scope` itself; nested scopes appear as nodes, their insides do not."""
    todo, nodes = _inner(scope), []
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo += _outer(node) if isinstance(node, _SCOPES) else list(ast.iter_child_nodes(node))
    return nodes


def _pos(node):
    return (node.lineno, node.col_offset)


def _bindings(scope, nodes):
    """({name: first position bound in this scope}, names declared global)."""
    bound, declared = {}, set()

    def bind(name, node):
        if name not in bound or _pos(node) < bound[name]:
            bound[name] = _pos(node)

    if isinstance(scope, _FUNCTIONS):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]:
            bound[arg.arg] = (0, 0)
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bind(a.asname or a.name.split(".")[0], node)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, node)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name, node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
    for name in declared:
        bound.pop(name, None)
    return bound, declared


def _module_bindings(trees):
    """[{name: first position}] of each cell's top level: what each cell binds as a global."""
    return [_bindings(tree, _scope_nodes(tree))[0] for tree in trees]


def _history_reads(tree, earlier, anywhere):
    """[(line, name)] of the reads of IPython's history names in one cell that are not the student's own variable.

    earlier: names the cells before this one bind at their top level; anywhere: the same for every cell."""
    found = []

    def visit(scope, enclosing):  # enclosing: [(kind, bound)] of the scopes around, innermost last
        nodes = _scope_nodes(scope)
        bound, declared = _bindings(scope, nodes)
        ordered = isinstance(scope, (ast.Module, ast.ClassDef))
        for node in nodes:
            reads = []
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads = [node]
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                reads = [node.target]  # `_i += 1` reads _i first
            for read in reads:
                name = read.id
                if not HISTORY_NAMES.match(name):
                    continue
                if name in bound and name not in declared and (not ordered or bound[name] < _pos(read)) \
                        and not (isinstance(read.ctx, ast.Store) and bound[name] == _pos(read)):
                    continue  # its own variable, bound before (or a local of this function)
                if name not in declared and any(kind == "function" and name in b for kind, b in enclosing):
                    continue  # a closure over an enclosing function's variable
                stable = not REBOUND_EACH_CELL.match(name)
                at_top = isinstance(scope, ast.Module)
                if stable and (name in earlier or (not at_top and name in anywhere)):
                    continue  # the student's own In/Out, bound in a cell before (or anywhere, read from a function)
                found.append((read.lineno, name))
        kind = "function" if isinstance(scope, _FUNCTIONS + _COMPREHENSIONS) else "class"
        inner = enclosing + ([(kind, set(bound))] if not isinstance(scope, ast.Module) else [])
        for node in nodes:
            if isinstance(node, _SCOPES):
                visit(node, [e for e in inner if e[0] == "function"] if isinstance(node, _FUNCTIONS) else inner)

    visit(tree, [])
    return sorted(set(found))


VALUE_TYPES = {"float", "int", "complex", "bool", "Tensor", "ndarray", "Parameter", "generic", "float64", "float32"}
COMPARISON_DUNDERS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__float__", "__abs__",
                      "__sub__", "__rsub__", "__array__", "__array_ufunc__", "__torch_function__", "__instancecheck__",
                      "__index__", "__int__", "__len__", "__getattribute__"}


def _lying_class(node):
    """The value type a class subclasses while redefining comparison or conversion (a lying answer), or None."""
    bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None) for b in node.bases]
    base = next((b for b in bases if b in VALUE_TYPES), None)
    defined = set()
    for stmt in node.body:
        defined |= set(_bound_names(stmt))
    return base if base and defined & COMPARISON_DUNDERS else None


def _introspection(node):
    """What a node does to read source or frames, or None."""
    if isinstance(node, ast.Import):
        names = [a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in INTROSPECTION_MODULES]
        return f"imports {names[0]}" if names else None
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in INTROSPECTION_MODULES:
        return f"imports from {node.module}"
    if isinstance(node, ast.ImportFrom) and node.module == "__main__" \
            and any(HISTORY_NAMES.match(a.name) for a in node.names):
        return "imports IPython's history from __main__"
    if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRIBUTES:
        return f"uses .{node.attr}"
    if isinstance(node, ast.Attribute) and HISTORY_NAMES.match(node.attr) and (
            not REBOUND_EACH_CELL.match(node.attr) or _root_name(node) == "__main__"):
        return f"reads IPython's history (.{node.attr})"  # __main__.In, sys.modules['__main__']._ih
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in MAGIC_CALLS and node.args \
            and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).split(" ")[0] in HISTORY_MAGICS:
        return f"runs IPython's %{node.args[0].value.split(' ')[0]} magic (it reads the input history or source)"
    # the same names as strings: getattr(sys, "_getframe"), __import__("inspect"), globals()["In"],
    # globals().get("_ih"), get_ipython().user_ns.get("In")
    args = []
    namespace = lambda n: (isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("globals", "vars", "locals")
                           or getattr(n, "attr", None) in NAMESPACES)  # noqa: E731
    if isinstance(node, ast.Call) and (getattr(node.func, "id", None) in ("getattr", "hasattr", "__import__")
                                       or getattr(node.func, "attr", None) == "import_module"):
        args = node.args
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and namespace(node.func.value) \
            and node.func.attr in ("get", "pop", "setdefault", "__getitem__"):
        args = node.args[:1]
    elif isinstance(node, ast.Subscript) and namespace(node.value):
        args = [node.slice]
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                arg.value in INTROSPECTION_MODULES | INTROSPECTION_ATTRIBUTES or HISTORY_NAMES.match(arg.value)):
            on_object = isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr")
            if on_object and REBOUND_EACH_CELL.match(arg.value) and _root_name(node.args[0]) != "__main__":
                continue  # getattr(self, "_i"): an attribute of the student's own object
            return f"names {arg.value!r}"
    return None


def structure_flags(submitted_nb, source_nb):
    """Test cells deleted, edited or duplicated, compared with the source notebook."""
    flags = []
    source_cells = {nbgrader_meta(c).get("grade_id"): c for c in source_nb.cells if nbgrader_meta(c).get("grade_id")}
    seen = {}
    for cell in submitted_nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid:
            seen[gid] = seen.get(gid, 0) + 1
    for gid, cell in source_cells.items():
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution") and gid not in seen:
            flags.append(f"structure: test cell {gid} was deleted (it scores zero)")
    flags += [f"structure: cell {gid} appears {n} times (nbgrader keeps the first)" for gid, n in seen.items() if n > 1]
    for cell in submitted_nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        src = source_cells.get(gid)
        if src is not None and cell.cell_type != src.cell_type:
            kind = "test cell" if nbgrader_meta(src).get("grade") and not nbgrader_meta(src).get("solution") else "cell"
            flags.append(f"structure: {kind} {gid} was turned into a {cell.cell_type} cell (nbgrader restores it as "
                         f"a {src.cell_type} cell and grades it)")
        elif src is not None and nbgrader_meta(src).get("locked") and cell.source.strip() != src.source.strip() \
                and "BEGIN HIDDEN TESTS" not in src.source:
            flags.append(f"structure: locked cell {gid} was edited (nbgrader restores it)")
        elif src is not None and "BEGIN HIDDEN TESTS" in src.source and not _same_visible(cell.source, src.source):
            flags.append(f"structure: test cell {gid} was edited (nbgrader restores it)")
    return flags


def _same_visible(submitted, source):
    """The student copy of a test cell has the hidden region removed: compare what is visible."""
    visible = re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", "", source, flags=re.S)
    squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
    return squash(submitted) == squash(visible)


def flag_submission(submitted_nb, source_nb, release_nb=None):
    """Every flag for one submitted notebook, as one-line messages.

    source_nb: the instructor version; release_nb: the student version as released (its
    cells are provided code too).
    """
    unchanged = {s.strip() for nb in (source_nb, release_nb) if nb is not None for s in _sources(nb)}
    student_code = [s for s in _sources(submitted_nb) if s.strip() not in unchanged]
    return structure_flags(submitted_nb, source_nb) + code_flags(student_code, test_helpers(source_nb))
