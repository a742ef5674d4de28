"""The kernel boundary's words: what a request may carry, how large an answer may be, and the grader's errors.

Read by the codec, the lending side, the session and the transport (one place for every limit of the wire); the
limits the kernel's side enforces too (MAX_ANSWER_BYTES, MAX_NODES, the error names) are defined there, read here."""
import builtins

from . import in_kernel

DTYPES = {"float16", "float32", "float64", "float96", "float128", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool", "complex64", "complex128", "complex192", "complex256"}  # numpy's, every precision
TORCH_ONLY = {"bfloat16"}
MAX_ANSWER_CHARS = in_kernel.MAX_ANSWER_BYTES  # the kernel's own cap, the one limit on an answer
MAX_ESCAPED_CHARS = 2 * MAX_ANSWER_CHARS  # a question, or an answer's text as a repr or JSON string (escapes) carries it
MAX_SEALED_CHARS = 3 * MAX_ANSWER_CHARS  # a sealed answer's prompt: the answer as a JSON string (escaped) in an object
MAX_DIMS = 64
MAX_NODES = in_kernel.MAX_NODES  # values in one answer (the kernel's encode refuses more, as an answer too large)
TEST_MODULE = "__grader_test__"  # the module name of every test cell's and grader-setup cell's definitions
LENT_CALL_MEMORY = 2**30  # bytes a lent object may add to the grader's process while the kernel's call runs it
CALLBACK_OPS = {"call", "vjp", "getattr", "len", "list", "getitem", "bool", "next"}
BUILTIN_ERRORS = {name: getattr(builtins, name) for name in in_kernel.BUILTIN_ERRORS}  # the kinds an answer may name
CALLBACK_ERRORS = set(BUILTIN_ERRORS) | {"StopIteration"}  # the kinds a failed question's reply may name
COURSE_MODULES = {"builtins", "copyreg", "_codecs", "collections", "functools", "math", "torch", "numpy",
                  "course_utils"}  # what every kernel of the course can import: a request refers to nothing else


class GraderSideError(BaseException):
    """The grader could not ask the kernel (no answer, a malformed answer): never the student's verdict.

    A BaseException, so that a test's own `except Exception` (a fallback for an answer that raises)
    cannot take it for the student's error: it ends the test cell, which is flagged for review."""


class UnreadableAnswer(GraderSideError):
    """An answer the grader cannot read as data (malformed, forged, past a budget): every decoding failure."""


class KernelRefused(BaseException):
    """A kernel that replied but gave the grader no answer of the grader's own code (its request raised there, no
    answer, an answer not sealed inside the request, two answers): what the student's code installed or replaced in
    the kernel stopped or rewrote it, since in a kernel of the course's packages that code always answers. The
    student's failure: the test cell fails with the message (verdicts.TestRunner), never left pending. A
    BaseException, so that a test's own `except Exception` cannot take it for an answer's error and go on."""


class NoAnswer:
    """What the transport read instead of a sealed answer: `why`, the grader's own words for what the kernel did."""

    def __init__(self, why):
        self.why = why
