"""Verdicts decided on the grader's side: a test cell never runs in the student's kernel.

A graded test cell (its visible and its hidden part) is taken from the lesson's source notebook
and executed here, in the grading process, with this process's own numpy, torch and
course_utils. Its namespace holds what the source notebook's `grader-setup` cells define (run
here once, in order) and the import statements of the source's other ready-made cells. Every
other name the test reads (the student's answers, the notebook's variables) is fetched from the
kernel through a Session (session.py) answered by the kernel's side (in_kernel/): plain data (tensors, arrays,
numbers, strings and containers of them) arrives as a copy, anything else as a `Remote` handle
whose calls, attributes, len(), iteration and indexing are requests to the kernel. Arguments
travel by value as data only, handles by id; what the test itself defined (a fake model, a
reference function) is lent, never sent: it runs here when the student's code uses it. A call
that changes its tensor or array arguments in place fails (unless the test allows it), and the
test's own tensors never change.

So the student's code runs only inside those requests, and the comparisons, the reference
values and the hidden test's source stay here: nothing patched in the kernel takes part in a
comparison, and the kernel's history never holds a hidden test. What the student's code prints
or raises is not passed on: a failed request becomes a message written here ("softmax raised
ValueError"). What remains in the kernel is `cu.forbid`: the forbidden operators are refused
inside the request by torch's function and dispatch modes (see course_utils.refusals.forbid).
"""
import ast
import builtins
import contextlib
import io

from .. import cells
from .wire import TEST_MODULE, GraderSideError, KernelRefused

SETUP_TAG = "grader-setup"


# ------------------------------------------------------------------ a notebook's tests

def code_of(source):
    """A cell's source with IPython magics and shell lines blanked (they mean nothing here)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _bound_names(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def free_names(tree):
    """Names a cell's syntax tree reads and never binds itself (builtins excluded)."""
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loads - _bound_names(tree) - set(dir(builtins))


def _top_level_names(source):
    try:
        tree = ast.parse(code_of(source))
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        names |= _bound_names(ast.Module(body=[node], type_ignores=[])) if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else {node.name}
    return names


class LessonTests:
    """The trusted half of a lesson: its set-up, its test cells by grade_id, the names students define."""

    def __init__(self, source_nb):
        code = [c for c in source_nb.cells if c.get("cell_type") == "code" and c.get("id") != "colab-setup"]
        self.tests = {cells.grade_id(c): c.source for c in code if cells.is_test(c)}
        self.answer_names = set().union(*[_top_level_names(c.source) for c in code if cells.is_answer(c)])
        setup = []
        for c in code:
            if SETUP_TAG in c.get("metadata", {}).get("tags", []):
                setup.append(code_of(c.source))
            elif not cells.is_answer(c) and not cells.is_test(c):
                try:
                    tree = ast.parse(code_of(c.source))
                except SyntaxError:
                    continue
                setup += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        self.setup = "\n".join(setup)
        self._compiled = {}

    def modules(self):
        """The modules the set-up imports (`from a.b import c` imports a.b)."""
        found = set()
        for node in ast.walk(ast.parse(self.setup)):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
        return found

    def compiled(self, grade_id):
        """Test cell `grade_id` worked out once, for every student: (the names it reads and never binds, in
        order; its code; the names it binds)."""
        if grade_id not in self._compiled:
            tree = ast.parse(code_of(self.tests[grade_id]))
            self._compiled[grade_id] = (sorted(free_names(tree)), compile(tree, f"<test {grade_id}>", "exec"),
                                        _bound_names(tree))
        return self._compiled[grade_id]

    def runner(self, session):
        return TestRunner(self, session)


class TestRunner:
    """Runs a lesson's test cells here, one at a time, against one student's kernel."""
    __test__ = False

    def __init__(self, lesson, session):
        self.lesson, self.session = lesson, session
        self.namespace = None
        self.defined = set()
        from course_utils.charged_once import record_verdicts
        record_verdicts({})  # what cu.charged reads: this runner's verdicts so far, none yet

    def _start(self):
        self.namespace = {"__name__": TEST_MODULE, "__builtins__": builtins}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(self.lesson.setup, "<grader-setup>", "exec"), self.namespace)
        self.defined = set(self.namespace)

    def run(self, grade_id):
        """Run test cell `grade_id`; returns (stdout text, exception or None)."""
        if self.namespace is None:
            self._start()
        reads, code, binds = self.lesson.compiled(grade_id)
        out, error = io.StringIO(), None
        from course_utils.charged_once import record_verdict
        try:
            for name in reads:
                if name in self.lesson.answer_names or name not in self.defined:
                    try:
                        self.namespace[name] = self.session.fetch(name)
                    except NameError:
                        self.namespace.pop(name, None)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                exec(code, self.namespace)
            error = None
        except GraderSideError as e:
            error = e  # (not passed: a later replay of this part may excuse what it explains)
            raise
        except KernelRefused as e:  # the kernel stopped or rewrote the grader's request: the student's failure
            error = AssertionError(str(e))
        except Exception as e:  # noqa: BLE001: the test failed; its message is the verdict's reason
            dead = _dead_kernel(e)
            if dead is not None:  # (nbclient's) the kernel is gone, however the test reworded it: a crash
                raise dead from None
            error = e
        finally:
            self.defined |= binds
            record_verdict(grade_id, error is None)
            from course_utils.charged_once import end_cell
            end_cell()  # the cell's cu.stand_in parts stand in for no later cell
        return out.getvalue(), error


def _dead_kernel(error):
    """The DeadKernelError behind a test's error (the error itself, or one it was raised while handling: a test
    that reports a crash in its own words), else None."""
    for _ in range(20):
        if error is None:
            return None
        if type(error).__name__ == "DeadKernelError":
            return error
        error = error.__cause__ or error.__context__
    return None


def outputs_for(stdout, error):
    """nbformat outputs for a test cell run here: what the test printed, and its error (no traceback lines)."""
    from nbformat.v4 import new_output
    outputs = [new_output("stream", name="stdout", text=stdout)] if stdout else []
    if error is not None:
        ename, evalue = type(error).__name__, str(error)[:2000]
        outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))
    return outputs
