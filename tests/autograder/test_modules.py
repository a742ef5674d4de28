"""The autograder's modules form no import cycle (docs/design.md maps the modules)."""
import ast
import os
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
                base = _absolute(node, package)
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


def test_every_limit_is_declared_once_and_read_by_the_command_line_the_traits_and_the_sandbox(tmp_path):
    """autograder/sandbox/limits.py declares each limit, every time included; nothing else holds its default."""
    import dataclasses

    from autograder.__main__ import build_parser
    from autograder.course import load_config
    from autograder.preprocessors import SandboxedExecute
    from autograder.sandbox import DEFAULTS, sandbox_settings
    from autograder.sandbox.limits import Limits
    from autograder.run import grading_config

    defaults = Limits()
    parsed = build_parser().parse_args(["grade"])
    assert all(getattr(parsed, f.name) == getattr(defaults, f.name) for f in dataclasses.fields(Limits))
    assert {k: DEFAULTS[k] for k in ("memory_mb", "nproc", "fsize_mb", "cpu_s")} == defaults.for_the_sandbox()
    execute, plain = SandboxedExecute(), load_config(tmp_path)  # plain: what plain nbgrader reads
    assert (execute.timeout, execute.check_timeout, execute.notebook_timeout, execute.max_output_bytes) == (
        defaults.cell_timeout, defaults.integrity_timeout, defaults.notebook_timeout, defaults.output_kb * 1024)
    assert (plain.Execute.timeout, plain.Execute.iopub_timeout) == (defaults.cell_timeout, defaults.iopub_timeout)

    # one value given on the command line reaches the kernel's sandbox and nbgrader's traits
    from autograder.sandbox.limits import from_arguments as limits_from
    args = build_parser().parse_args(["grade", "--memory-mb", "1500", "--fsize-mb", "8", "--output-kb", "40",
                                      "--notebook-timeout", "100", "--cell-timeout", "7", "--iopub-timeout", "9",
                                      "--integrity-timeout", "11", "--hard-limit-grace", "13"])
    limits = limits_from(args)
    settings = sandbox_settings(tmp_path, limits)
    assert (settings["memory_mb"], settings["fsize_mb"]) == (1500, 8)
    assert settings["cpu_s"] == (100 + 13) * (os.cpu_count() or 1)
    config = grading_config(tmp_path, limits=limits)
    assert (config.Execute.timeout, config.Execute.iopub_timeout, config.GradingExecute.check_timeout) == (7, 9, 11)
    assert config.SandboxedExecute.max_output_bytes == 40 * 1024
    assert config.SandboxedExecute.notebook_timeout == 100


def test_course_paths_are_nbgraders_layout_and_built_in_one_place(tmp_path):
    """autograder/course.py builds every path in a course directory, with nbgrader's CourseDirectory layout."""
    import re
    from pathlib import Path

    from nbgrader.coursedir import CourseDirectory

    from autograder.course import step_folder, step_notebook
    layout = CourseDirectory(root=str(tmp_path))
    for step, student in [("source", "."), ("release", "."), ("submitted", "ann"), ("autograded", "ann"),
                          ("feedback", "ann")]:
        want = Path(layout.format_path(getattr(layout, f"{step}_directory"), student, "03_x"))
        assert step_folder(tmp_path, step, "03_x", student) == want
        assert step_notebook(tmp_path, step, "03_x", student) == want / "03_x.ipynb"
    by_hand = re.compile(r'''(Path\([^)]*|/ )["'](submitted|autograded|feedback|source|release|reports|trimmed|\.grading)["']''')
    package = Path(__file__).resolve().parents[2] / "autograder"
    found = [f"{p.relative_to(package)}:{n}" for p in package.rglob("*.py") if p.name != "course.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if by_hand.search(line)]
    assert not found, f"course paths built by hand (use autograder.course's helpers): {found}"


def _imports(path):
    """The modules a file imports (relative imports resolved inside autograder/)."""
    package = path.relative_to(REPO).parent.as_posix().replace("/", ".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_no_preprocessor_imports_the_grading_run():
    """The preprocessors run inside a worker; they speak the job's protocol (job.py), never the run's modules."""
    for path in (REPO / "autograder" / "preprocessors").glob("*.py"):
        found = {m for m in _imports(path) if m == "autograder.run" or m.startswith("autograder.run.")}
        assert not found, (path.name, found)


def test_the_jobs_files_and_variable_are_spelled_in_job_py_only():
    names = ('"job.json"', '"events.txt"', '"kernels.txt"', '"result.json"', '"worker.log"', '"events-hung.txt"',
             '"AUTOGRADER_EVENTS"')
    for path in (REPO / "autograder").rglob("*.py"):
        if path.name != "job.py":
            text = path.read_text()
            assert not [n for n in names if n in text], (path.name, [n for n in names if n in text])


def test_job_py_is_a_leaf():
    """The standard library only: the parent and the worker's preprocessors both read it."""
    assert not {m for m in _imports(REPO / "autograder" / "job.py") if m.split(".")[0] in ("autograder", "nbgrader",
                                                                                         "torch", "jupyter_client")}


def test_what_grading_found_and_what_a_student_may_see_are_leaves():
    """outcome.py (every reader of a report reads it) imports only job.py and files.py of the autograder, shown.py
    (the feedback's rule, which the class report shares) nothing: both read by the run and by the commands above it."""
    for name, allowed in {"outcome.py": {"autograder.job", "autograder.files"}, "shown.py": set()}.items():
        found = {m for m in _imports(REPO / "autograder" / name) if m.split(".")[0] in ("autograder", "nbgrader")}
        assert all(m in allowed or m.rsplit(".", 1)[0] in allowed for m in found), (name, found)


def test_modules_keep_to_their_room():
    """Rules a reader assumes: feedback reads the course's configuration, not the run's; the integrity check does not
    import the static flags, the size check not collect (each reads a leaf instead: cell_code, files); the class
    report stands below the preprocessors (it reads shown.py, the rule it shares with the feedback)."""
    rules = {"feedback.py": {"autograder.run"}, "kernel/integrity.py": {"autograder.flags"},
             "size.py": {"autograder.collect"}, "class_report.py": {"autograder.preprocessors", "autograder.run"}}
    for name, never in rules.items():
        found = {m for m in _imports(REPO / "autograder" / name) if any(m == n or m.startswith(n + ".") for n in never)}
        assert not found, (name, found)


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 350, 60


def _python_files():
    return sorted(p for package in ("autograder", "course_utils") for p in (REPO / package).rglob("*.py"))


def test_no_module_is_longer_than_a_reader_holds_in_mind():
    """No module of autograder/ or course_utils/ over 350 lines, no function over 60 (docs/design.md)."""
    long_modules = [f"{p.relative_to(REPO)}: {n}" for p in _python_files()
                    if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    long_functions = [f"{p.relative_to(REPO)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}"
                      for p in _python_files() for node in ast.walk(ast.parse(p.read_text()))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long_modules and not long_functions, (long_modules, long_functions)


def test_no_private_name_is_imported_between_modules():
    """A name that starts with _ belongs to its module: imported or reached as module._name elsewhere, it is a
    public interface in hiding (a test may still reach one)."""
    found = []
    for path in _python_files():
        tree = ast.parse(path.read_text())
        local = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in
                                                     ("autograder", "course_utils")):
                found += [f"{path.relative_to(REPO)}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
                local.update({a.asname or a.name: a.name for a in node.names})
            elif isinstance(node, ast.Import):
                local.update({(a.asname or a.name).split(".")[0]: a.name for a in node.names
                              if a.name.split(".")[0] in ("autograder", "course_utils")})
        found += [f"{path.relative_to(REPO)}:{node.lineno} {node.value.id}.{node.attr}" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in local
                  and node.attr.startswith("_") and not node.attr.startswith("__")]
    assert not found, found


# ---------------------------------------------------------------- one import address per public name

def _module_file(dotted):
    """The file of a module of this repository (a package's __init__.py), or None."""
    path = REPO.joinpath(*dotted.split("."))
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def _top_level(tree):
    """The statements run when a module is imported (into if/try/with, not into functions or classes)."""
    for node in tree.body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers"):
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                yield from _top_level(ast.Module(body=[n for n in getattr(node, block, []) if isinstance(n, ast.stmt)]))


def _defined(path):
    """The names a module defines itself (functions, classes, assignments), not those it imports."""
    found = set()
    for node in _top_level(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return found


def _face(dotted):
    """The names a package's __init__.py hands on (its __all__ list, or the keys of its lazy _FACE)."""
    path = _module_file(dotted)
    if path is None or path.name != "__init__.py":
        return set()
    names = set()
    for node in _top_level(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] in (["__all__"], ["_FACE"]):
            value = node.value
            items = value.keys if isinstance(value, ast.Dict) else getattr(value, "elts", [])
            names |= {item.value for item in items if isinstance(item, ast.Constant)}
    return names


def _absolute(node, package):
    """The module an `ImportFrom` node names, a relative one resolved against `package`."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return base


def _from_imports(path):
    """(module, name, line) of each `from module import name` of the autograder in a file, relative ones resolved."""
    package = path.relative_to(REPO).parent.as_posix().replace("/", ".")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base.split(".")[0] == "autograder":
                yield from ((base, alias.name, node.lineno) for alias in node.names)


# Second addresses left to their packages' owners: the kernel boundary's face is issue 59's part 1 (the meter hands
# on meter_process's names; in_kernel/ is one program whose names no file defines alone), flags/syntax.py hands on
# cell_code.parse. Each must still be wrong (the list only shrinks).
KNOWN_SECOND_ADDRESSES = {("autograder/kernel/lending.py", "LAUNCH_SECONDS", "autograder.kernel.meter"),
                          ("autograder/kernel/lending.py", "Timeout", "autograder.kernel.meter"),
                          ("tests/autograder/test_verdicts.py", "UNSEEN", "autograder.kernel.in_kernel"),
                          ("autograder/flags/__init__.py", "parse", "autograder.flags.syntax"),
                          ("autograder/flags/code.py", "parse", "autograder.flags.syntax")}


def test_each_public_name_has_one_import_address():
    """A name is imported from where it is defined, or, when a package's face (__init__.py) hands it on, from that
    face by every module outside the package: never through a module that only imports it itself (run/grading.py
    used to hand on Limits, sandbox_settings and grading_config, and Limits had four addresses)."""
    wrong, known = [], set()
    files = [p for top in ("autograder", "tests", "benchmarks", "tools") for p in (REPO / top).rglob("*.py")]
    for path in files:
        importer = path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
        for module, name, line in _from_imports(path):
            if _module_file(f"{module}.{name}") or _module_file(module) is None:
                continue  # a module, or not this repository's
            parts = module.split(".")
            faces = [".".join(parts[:i]) for i in range(2, len(parts) + 1) if name in _face(".".join(parts[:i]))]
            outside = [f for f in faces if not importer.startswith(f + ".")]
            want = outside[0] if outside else module if name in _defined(_module_file(module)) else None
            if module != want and (path.relative_to(REPO).as_posix(), name, module) in KNOWN_SECOND_ADDRESSES:
                known.add((path.relative_to(REPO).as_posix(), name, module))
            elif module != want:
                wrong.append(f"{path.relative_to(REPO)}:{line} {name} from {module}"
                             + (f" (its address: {want})" if want else " (not defined there)"))
    assert not wrong, wrong
    assert known == KNOWN_SECOND_ADDRESSES, f"no longer a second address: {KNOWN_SECOND_ADDRESSES - known}"


def test_the_runs_public_face():
    """What autograder.run hands on, and that every module outside the run takes those names from there (the model:
    jupyter_client's tests/test_public_api.py)."""
    import autograder.run as run
    assert run.__all__ == ["GradingInterrupted", "grade", "grade_cluster", "grading_config"]
    assert all(callable(getattr(run, name)) for name in run.__all__)
    outside = [p for top in ("autograder", "tests", "benchmarks", "tools") for p in (REPO / top).rglob("*.py")
               if "autograder/run/" not in p.as_posix()]
    reached = [f"{p.relative_to(REPO)}:{line} {name}" for p in outside for module, name, line in _from_imports(p)
               if module.startswith("autograder.run.") and name in run.__all__]
    assert not reached, f"the run's public names are imported from autograder.run: {reached}"


def _globals_used_and_defined(source, name):
    """(names the code reads as globals or builtins, names its top level binds) of one module's source."""
    import symtable
    top = symtable.symtable(source, name, "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used, tables = set(), [top]
    while tables:
        table = tables.pop()
        free_at_top = table is top or table.get_type() == "class"  # a class body reads unbound names as globals
        used |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and (
            s.is_global() or (free_at_top and not s.is_local() and not s.is_free()))}
        tables += table.get_children()
    return used, defined


def test_the_in_kernel_program_is_written_in_order():
    """Each part of the kernel's one program reads only names that earlier parts (or builtins) define, so the parts
    read top to bottom: what a later part offers an earlier one comes as an argument (a cycle no import shows)."""
    import builtins

    from autograder.kernel import in_kernel
    known = set(dir(builtins))
    for part in in_kernel.PARTS:
        source = part.read_text()
        compile(source, str(part), "exec")
        used, defined = _globals_used_and_defined(source, str(part))
        assert not used - known - defined, f"{part.name} reads names no earlier part defines: {sorted(used - known - defined)}"
        known |= defined
    assert in_kernel.SOURCE == "\n".join(part.read_text() for part in in_kernel.PARTS)


def _private(name):
    return isinstance(name, str) and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_fields(tree):
    """{class name: private names its body defines or its methods assign on self} of one module."""
    found = {}
    for klass in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        names = found.setdefault(klass.name, set())
        for node in ast.walk(klass):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not klass and _private(node.name):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
                names.add(node.attr)
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__slots__" for t in node.targets):
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and _private(c.value)}
    return found


def _root(node):
    """The name an attribute chain starts from (os of os.path._x), or None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_BY_NAME = {"getattr", "hasattr", "setattr", "delattr", "__getattribute__", "__setattr__", "__delattr__"}


def test_no_private_field_is_read_across_files():
    """A private attribute is read on self (or cls, super()) of a class that defines it in the same file, or on an
    imported module: never on another object (x._id, getattr(x, "_id"), object.__getattribute__(x, "_id")) unless
    the file defines that name, and never as state shared with a base class defined in another file."""
    paths = [p for p in _python_files() if p.parts[len(REPO.parts)] == "autograder" and "in_kernel" not in p.parts]
    trees = {path: ast.parse(path.read_text()) for path in paths}
    classes = {name: (path, fields) for path, tree in trees.items() for name, fields in _private_fields(tree).items()}
    wrong = []
    for path, tree in trees.items():
        here = set().union(*_private_fields(tree).values(), {n.name for n in tree.body if hasattr(n, "name")},
                           {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                            if isinstance(t, ast.Name)})
        modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in n.names}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in here and not (
                    getattr(node.value, "id", None) in {"self", "cls"} or _root(node.value) in modules) and not (
                    isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "super"):
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in _BY_NAME \
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and _private(node.args[1].value) and node.args[1].value not in here:
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno} {node.args[1].value!r} by name")
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    base_path, fields = classes.get(getattr(base, "id", getattr(base, "attr", "")), (path, set()))
                    shared = fields & {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                                       and _private(n.attr) and getattr(n.value, "id", "") == "self"}
                    if base_path != path and shared:
                        wrong.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} shares {sorted(shared)} "
                                     f"with its base in {base_path.relative_to(REPO)}")
    assert not wrong, wrong


def test_the_kernel_boundary_is_reached_through_its_face():
    """Outside autograder/kernel/, the boundary is imported from the package (open_boundary, Verdict, ...), never
    from one of its modules: what the package's __init__ offers is all another package may rely on."""
    kernel = REPO / "autograder" / "kernel"
    modules = {f"autograder.kernel.{p.stem}" for p in kernel.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    wrong = [f"{path.relative_to(REPO)}: {name}" for path in _python_files() if kernel not in path.parents
             for name in sorted(_imports(path)) if any(name == m or name.startswith(m + ".") for m in modules)]
    assert not wrong, wrong
