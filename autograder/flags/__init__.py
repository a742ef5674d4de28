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
- `escape`: runs work where the graded call's watch does not reach: another thread or process
  (`threading`, `concurrent.futures`, `multiprocessing`, `subprocess`, `os.fork`/`system`), a custom
  operator (`torch.library`), `ctypes` (however reached: `sys.modules`, `.ctypes`, `numpy.ctypeslib`),
  or torch's mode stack switched off or popped
  (`DisableTorchFunction`, `_DisableTorchDispatch`, `_pop_torch_function_stack`, ...): a forbidden
  operator or an untiled allocation run there is not seen by `cu.forbid` or the memory count;
- `kernel`: reaches the kernel's own machinery (displayhook, AST/input transformers,
  showtraceback, custom exception handlers, trace hooks, output formatters, IPython's events, audit
  hooks, the built-ins table or a dict subclass that could stand in for it), which can fake or hide a
  result, also where getattr names it;
- `structure`: a test cell deleted, edited, duplicated or turned into Markdown (or raw) (nbgrader
  restores edited and converted cells and grades them; a deleted test cell scores zero), or a graded
  cell moved out of its released order (grading runs cells in the submitted order).

One module per kind of rule: `code` (patch, eq, lie, helper, reach, kernel, over every cell and the
code passed to eval/exec/compile), `introspect` and `history` (the introspect rule, and whose a
history name is), `structure`; `syntax` reads a cell as IPython runs it. `moves` is no flag of its
own: the lines that move tensor data to numpy or raw memory, which the worker names beside a memory
test that only the kernel's own count measured (an `integrity:` flag).
"""
from .code import code_flags, test_helpers
from .moves import data_moves
from .structure import deleted_tests, structure_flags
from .syntax import parse

__all__ = ["code_flags", "data_moves", "deleted_tests", "flag_submission", "parse", "structure_flags", "student_code",
           "test_helpers"]


def flag_submission(submitted_nb, source_nb, release_nb=None):
    """Every static flag for one submitted notebook, as `Finding`s (job.py): the parent's, before grading. The
    worker adds what it restored and the test cells grading cannot find (restore.py, `deleted_tests`).

    source_nb: the instructor version; release_nb: the student version as released (its
    cells are provided code too).
    """
    return structure_flags(submitted_nb, source_nb) + code_flags(student_code(submitted_nb, source_nb, release_nb),
                                                                 test_helpers(source_nb))


def student_code(submitted_nb, source_nb, release_nb=None, numbered=False):
    """The code cells the student wrote: every one that is not a verbatim copy of a cell of the source or the
    release (provided code, the stubs and the solutions as given); numbered: as (its place in the notebook, from 1,
    source) pairs."""
    unchanged = {s.strip() for nb in (source_nb, release_nb) if nb is not None for s in _sources(nb)}
    cells = [(n, c.source) for n, c in enumerate(submitted_nb.cells, 1)
             if c.cell_type == "code" and c.source.strip() not in unchanged]
    return cells if numbered else [source for _, source in cells]


def _sources(nb):
    return [c.source for c in nb.cells if c.cell_type == "code"]
