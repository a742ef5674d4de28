"""History names: IPython's, or the student's own?

`In`, `_ih`, `_i`, ... are IPython's input history only where the name is not the student's own variable:
`for _i in range(3): print(_i)` reads a loop counter. A read is the student's own when its scope binds the
name (a function's local or parameter, a comprehension's variable, a closure over an enclosing function's
local), or, at the top level of a cell (and in a class body), when the same cell bound it earlier. IPython
sets `_i`, `_ii`, `_iii` and `_i<n>` again before every cell, so a binding in an earlier cell, or a global
read from inside a function, still reads the history; `In`, `Out`, `_ih`, `_oh`, `_dh` are set once, so a
student's own top-level binding of them, in any cell before, makes them theirs.
"""
import ast
import re

HISTORY_NAMES = re.compile(r"^(In|Out|_ih|_oh|_i{1,3}|_i\d+|_dh)$")
REBOUND_EACH_CELL = re.compile(r"^(_i{1,3}|_i\d+)$")  # IPython sets these again before every cell it runs
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


def module_bindings(trees):
    """[{name: first position}] of each cell's top level: what each cell binds as a global."""
    return [_bindings(tree, _scope_nodes(tree))[0] for tree in trees]


def history_reads(tree, earlier, anywhere):
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
