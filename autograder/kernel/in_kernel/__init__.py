"""The student's side of a grader-side test: answer one request, in the student's kernel.

The grader never sends a test cell to the student's kernel (verdicts.py). It runs the test
on its own side and, whenever the test touches a student object, sends one request here: fetch
a global, call a function or method, read an attribute, take len(), list an iterable, or run a
call with gradients. The request is a pickle made by the grader (arguments by value, remote
handles by id); the answer is JSON that carries only plain data: numbers, strings, tensors and
arrays as raw bytes, containers of these, and ids of objects that stay here (handles), at most
MAX_ANSWER_BYTES of it (the one limit: the grader's side reads it from here). Arguments arrive as copies;
an argument the student's code changes in place is reported by position, and the grader's test
fails it (its own tensors never change).

Objects the grader does not send (the test's own code: a fake model, a reference function, a
lambda) arrive *lent*: a `Lent` stand-in whose calls, public attributes, len, items and truth
are questions to the grader, asked with the kernel's `input()` (Jupyter's stdin channel) while
the request runs. A stand-in works only during the request that brought it.

This package is the grader's program in the student's kernel (with the integrity check's, kernel/integrity.py).
Its parts are one program, assembled in order (PARTS) into SOURCE, each part using only names the earlier ones define,
which is sent with every request (as bytecode, and as source for a kernel whose Python reads other bytecode) and run in a fresh namespace (`serve`), as a user expression of a silent execute,
so there is nothing stored in the kernel that a cell could replace except the handle table.
Whatever the student's code changes here, it can only change the data it sends back, which is
its own answer: the comparison happens in the grader's process.

What reads the request and writes the answer is fixed before any student code runs, not looked up
by a name the student's code could rebind: the built-ins this code uses are checked to be C's own
(transport.kernel_expression hands them over, or the request is answered "Tampered"), the request is
read by C's own `_pickle.Unpickler` (found among object's subclasses by flags no Python class can
have), base64 is binascii's C functions, and the answer's JSON is written here (`_json`). So
pickle, json, base64, io or contextlib patched in the kernel change nothing a request does.

The grader's process imports this package too (the same SOURCE run in its namespace), for its limits and
words (MAX_ANSWER_BYTES, UNSEEN, TAMPERED) and for in-process transports (transport.in_process_transport).
"""

import importlib.util
from pathlib import Path

# course_utils' refusal table (data only), read as text so that importing this package imports no torch: its
# KERNELS, COMPUTING_KEYS and LAUNCHER_OPS are the program's own, whatever the kernel's copy says
TABLE = Path(importlib.util.find_spec("course_utils").submodule_search_locations[0]) / "refusal_table.py"
# in order: each part uses only names the earlier ones define (what a later part offers comes as an argument)
PARTS = (TABLE,) + tuple(Path(__file__).parent / f"{part}.py" for part in
                         ("tools", "encode", "lent", "launch", "watch", "serve"))
SOURCE = "\n".join(part.read_text() for part in PARTS)
CODE = compile(SOURCE, "<autograder>", "exec")  # compiled once: run here, in in-process transports, and marshalled
exec(CODE, globals())  # noqa: S102: the program above, as this module
