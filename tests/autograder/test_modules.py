"""The autograder's modules form no import cycle (docs/design.md maps the modules)."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_autograder_module_imports_one_that_imports_it():
    """No import cycle, imports inside functions included (export and lms once imported each other)."""
    modules = {p.relative_to(REPO).with_suffix("").as_posix().replace("/", "."): p
               for p in (REPO / "autograder").rglob("*.py")}
    modules = {name.removesuffix(".__init__"): p for name, p in modules.items()}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    for target in (f"{base}.{alias.name}", base):
                        if target in modules and target != name:
                            found.add(target)
                            break
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules and a.name != name}
        graph[name] = found

    def cycle_from(start, node, seen):
        for nxt in graph[node]:
            if nxt == start:
                return [node, nxt]
            if nxt not in seen:
                seen.add(nxt)
                rest = cycle_from(start, nxt, seen)
                if rest:
                    return [node] + rest
        return None

    cycles = [c for name in sorted(graph) if (c := cycle_from(name, name, {name}))]
    assert not cycles, cycles[:3]
