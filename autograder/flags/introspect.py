"""The `introspect` rule on one syntax node: reading the running cell's source, the call stack or IPython's
history (where the hidden tests are while they run)."""
import ast

from .history import HISTORY_NAMES, REBOUND_EACH_CELL
from .syntax import root_name

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
NAMESPACES = {"user_ns", "user_global_ns", "__dict__"}  # where IPython keeps the history names


def introspection(node):
    """What a node does to read source or frames, or None."""
    if isinstance(node, ast.Import):
        names = [a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in INTROSPECTION_MODULES]
        return f"imports {names[0]}" if names else None
    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in INTROSPECTION_MODULES:
        return f"imports from {node.module}"
    if isinstance(node, ast.ImportFrom) and any(a.name in INTROSPECTION_ATTRIBUTES for a in node.names):
        return f"imports {next(a.name for a in node.names if a.name in INTROSPECTION_ATTRIBUTES)} from {node.module}"
    if isinstance(node, ast.ImportFrom) and node.module == "__main__" \
            and any(HISTORY_NAMES.match(a.name) for a in node.names):
        return "imports IPython's history from __main__"
    if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRIBUTES:
        return f"uses .{node.attr}"
    if isinstance(node, ast.Attribute) and HISTORY_NAMES.match(node.attr) and (
            not REBOUND_EACH_CELL.match(node.attr) or root_name(node) == "__main__"):
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
            if on_object and REBOUND_EACH_CELL.match(arg.value) and root_name(node.args[0]) != "__main__":
                continue  # getattr(self, "_i"): an attribute of the student's own object
            return f"names {arg.value!r}"
    return None
