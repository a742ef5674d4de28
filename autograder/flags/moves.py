"""Where the student's code moves tensor data out of PyTorch's sight: to numpy, to raw memory (ctypes, mmap), or by a
name it computes. Not a static flag on its own (numpy is honest work in most cells): the worker names these lines
beside a memory test that only the kernel's own count measured (no cgroup: grading without root), where the count
cannot see such memory (`Session.moves`). Read from the notebook as handed in, which no code of the kernel can change.
"""
import ast

from ..cell_code import parse

# what takes a tensor's data out of torch, or puts data made elsewhere back in
MOVES = {"numpy", "tolist", "data_ptr", "untyped_storage", "storage", "__array__", "__array_interface__", "__dlpack__",
         "from_numpy", "frombuffer", "from_dlpack", "to_dlpack", "asarray", "ascontiguousarray", "memmove", "memset",
         "from_address", "from_buffer", "from_buffer_copy", "string_at", "madvise"}
RAW_MEMORY = {"ctypes", "_ctypes", "mmap", "cffi", "numpy.ctypeslib"}
COMPUTED = {"getattr", "__import__", "import_module"}


def data_moves(numbered_cells):
    """["cell N, line M: what"] for each place the code cells, (N: the cell's place in the notebook, source) pairs,
    move data out of torch's sight."""
    found = []
    for number, source in numbered_cells:
        tree = parse(source)
        moves = sorted((node.lineno, what) for node in (ast.walk(tree) if tree is not None else ())
                       if (what := _move(node)))
        found += [f"cell {number}, line {line}: {what}" for line, what in moves]
    return found


def _move(node):
    if isinstance(node, ast.Attribute) and node.attr in MOVES:
        return f".{node.attr}"
    if isinstance(node, ast.Import):
        hit = [a.name for a in node.names if a.name in RAW_MEMORY or a.name.split(".")[0] in RAW_MEMORY]
        return f"imports {hit[0]}" if hit else None
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        names = [a.name for a in node.names if a.name in MOVES]
        if module in RAW_MEMORY or module.split(".")[0] in RAW_MEMORY or names:
            return f"imports {', '.join(names) or '*'} from {module}"
        return None
    if isinstance(node, ast.Call):
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        named = node.args[1 if name == "getattr" else 0:][:1]
        if name in COMPUTED and named and not isinstance(named[0], ast.Constant):
            return f"{name} of a computed name"
        if name in COMPUTED and named and (named[0].value in MOVES or named[0].value in RAW_MEMORY):
            return f"{name} of {named[0].value!r}"
    return None
