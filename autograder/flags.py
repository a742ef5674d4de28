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
- `reach`: names the grader's files in a string (gradebook, solutions, hidden tests, .git);
- `introspect`: reads the running cell's source or walks the call stack (`inspect`,
  `sys._getframe`, frame attributes, `linecache`, `traceback`, `gc`, IPython's history `In`/`_ih`),
  which is where the hidden tests are while they run;
- `kernel`: reaches the kernel's own machinery (displayhook, AST/input transformers,
  showtraceback, custom exception handlers, trace hooks), which can fake or hide a result;
- `structure`: a test cell deleted, edited or duplicated (nbgrader restores edited and
  duplicated cells; a deleted test cell scores zero).
"""
import ast
import re

WATCHED_MODULES = {"numpy", "torch", "builtins", "course_utils"}
DEFAULT_ALIASES = {"np": "numpy", "numpy": "numpy", "torch": "torch", "builtins": "builtins",
                   "__builtins__": "builtins", "course_utils": "course_utils"}
GRADER_FILES = re.compile(r"gradebook|solutions|hidden[ _]tests|\.git\b|nbgrader|autograded|submitted/",
                          re.IGNORECASE)


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _sources(nb):
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _parse(code):
    """AST of a cell, IPython magics and shell escapes blanked out; None when it does not parse."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


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


def code_flags(code_cells, helpers=frozenset()):
    """Flags for a list of student code strings."""
    trees = [t for t in map(_parse, code_cells) if t is not None]
    aliases = _module_aliases(trees)
    watched = lambda node: aliases.get(_root_name(node) or "")  # noqa: E731
    flags = []
    for tree in trees:
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
    return flags


INTROSPECTION_MODULES = {"inspect", "linecache", "traceback", "dis", "gc", "tokenize"}
INTROSPECTION_ATTRIBUTES = {"_getframe", "_current_frames", "f_back", "f_code", "f_globals", "f_locals", "f_lineno",
                            "tb_frame", "tb_next", "gi_frame", "cr_frame", "history_manager", "currentframe",
                            "getsource", "getsourcelines", "getframeinfo", "getouterframes", "getinnerframes",
                            "get_referrers", "get_objects", "co_consts", "__traceback__"}
KERNEL_ATTRIBUTES = {"displayhook", "display_pub", "iopub_socket", "send_response", "shell_handlers",
                     "ast_transformers", "input_transformers_cleanup", "input_transformers_post", "set_custom_exc",
                     "showtraceback", "_showtraceback", "run_cell", "run_code", "excepthook", "settrace", "setprofile"}
HISTORY_NAMES = re.compile(r"^(In|Out|_ih|_oh|_i{1,3}|_i\d+|_dh)$")


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
    if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRIBUTES:
        return f"uses .{node.attr}"
    if isinstance(node, ast.Name) and HISTORY_NAMES.match(node.id):
        return f"reads IPython's history ({node.id})"
    # the same names as strings: getattr(sys, "_getframe"), __import__("inspect"), globals()["In"]
    args = []
    if isinstance(node, ast.Call) and (getattr(node.func, "id", None) in ("getattr", "hasattr", "__import__")
                                       or getattr(node.func, "attr", None) == "import_module"):
        args = node.args
    elif isinstance(node, ast.Subscript) and (
            isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) in ("globals", "vars", "locals")
            or getattr(node.value, "attr", None) in ("user_ns", "user_global_ns", "__dict__")):
        args = [node.slice]
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and (
                arg.value in INTROSPECTION_MODULES | INTROSPECTION_ATTRIBUTES or HISTORY_NAMES.match(arg.value)):
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
        if src is not None and nbgrader_meta(src).get("locked") and cell.source.strip() != src.source.strip() \
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
