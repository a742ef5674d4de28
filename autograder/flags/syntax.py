"""The small questions every rule asks of a cell's syntax tree (read as IPython runs it: cell_code.parse)."""
import ast

from ..cell_code import parse  # noqa: F401 (the rules read cells through it)


def root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def bound_names(node):
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
