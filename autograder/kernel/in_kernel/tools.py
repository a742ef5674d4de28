"""The kernel's side, part 1: its limits, and the tools it reads and writes with, as C made them.

One part of one program (in_kernel/__init__.py assembles the parts in order into one namespace): it uses
only names the earlier parts define (the refusal table, data, comes first) (tests/autograder/test_modules.py checks)."""
import sys

MAX_ANSWER_BYTES = 16 * 2**20  # the largest answer of any lesson's tests is about 0.2 MB
MAX_NODES = 200_000  # values in one answer (containers, items, tensors): past it, an answer too large
BUILTIN_ERRORS = ("ArithmeticError AssertionError AttributeError IndexError KeyError LookupError NameError "
                  "NotImplementedError OverflowError RecursionError RuntimeError TypeError "
                  "ValueError ZeroDivisionError MemoryError").split()
_ERROR_CLASSES = {klass.__name__: klass for klass in (
    ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, LookupError, NameError, NotImplementedError,
    OverflowError, RecursionError, RuntimeError, TypeError, ValueError, ZeroDivisionError, MemoryError, StopIteration)}


# ------------------------------------------------------------------ the tools, as C made them

_type = (0).__class__.__class__  # `type`, from a literal: no name a cell could rebind
_FLAGS = _type.__dict__["__flags__"].__get__
_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: only C code makes such a class, and its name cannot change
_BUILTIN_FUNCTION = _type([].append)


class Tampered(Exception):
    """What this side reads or writes with is not what C made (a patched module): the answer says so."""


class Unrefused(Exception):
    """A refusal the request entered no longer held when the student's call returned: the answer says so."""


def _c_class(module, name):
    """The class C code made as module.name: among object's direct subclasses, never through a module attribute
    (its metaclass made by C too: `type`, or torch's _TensorMeta)."""
    for klass in _type.__subclasses__(object):
        if _FLAGS(_type(klass)) & _IMMUTABLE and _FLAGS(klass) & _IMMUTABLE and klass.__module__ == module \
                and klass.__name__ == name:
            return klass
    raise Tampered(f"{module}.{name}")


def _c_function(module, name):
    """module.name, if it is C's own built-in function of that name (a Python replacement is not)."""
    found = getattr(sys.modules.get(module), name, None)
    if _type(found) is not _BUILTIN_FUNCTION or found.__name__ != name:
        raise Tampered(f"{module}.{name}")
    return found


def _b64decode(text):
    return _c_function("binascii", "a2b_base64")(text)


def _b64encode(data):
    return _c_function("binascii", "b2a_base64")(data, newline=False).decode("ascii")


class _Reader:
    """The file a pickle is read from: this code's own, fresh with each request."""

    def __init__(self, data):
        self.data, self.at = bytes(data), 0

    def read(self, n=-1):
        end = len(self.data) if n is None or n < 0 else self.at + n
        chunk, self.at = self.data[self.at:end], min(end, len(self.data))
        return chunk

    def readline(self):
        end = self.data.find(b"\n", self.at)
        return self.read(len(self.data) - self.at if end < 0 else end + 1 - self.at)


def _load(data, make_lent):
    """A request's pickle read by C's own Unpickler; handles and lent objects by their ids (make_lent(number, label):
    the stand-in of an object the grader lends, lent.Lent)."""

    class Unpickler(_c_class("_pickle", "Unpickler")):
        def persistent_load(self, pid):
            if pid[0] == "g":
                return make_lent(int(pid[1]), str(pid[2]))
            return _table()[pid[1]]

    return Unpickler(_Reader(data)).load()


_JSON_ESCAPES = {**{i: "\\u%04x" % i for i in range(32)}, 34: '\\"', 92: "\\\\"}


def _json(value):
    """JSON text of plain data (None, bools, str, int, lists, tuples, str-keyed dicts), written here."""
    kind = _type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is str:
        return '"' + str.translate(value, _JSON_ESCAPES) + '"'
    if kind is int:
        return int.__repr__(value)
    if kind is list or kind is tuple:
        return "[" + ",".join([_json(v) for v in value]) + "]"
    if kind is dict:
        return "{" + ",".join([_json(str(k)) + ":" + _json(v) for k, v in dict.items(value)]) + "}"
    raise TypeError(f"not plain data: {kind.__name__}")


class _Sink:
    """Where the student's prints go during a request: nowhere."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass


def _table():
    """The kernel's handle table: {id: object}. It lives in sys.modules so that it outlasts one request."""
    holder = sys.modules.get("__autograder_handles__")
    if holder is None or not isinstance(getattr(holder, "objects", None), dict):
        import types
        holder = types.ModuleType("__autograder_handles__")
        holder.objects = {}
        sys.modules["__autograder_handles__"] = holder
    return holder.objects


class TooLarge(Exception):
    """An answer past MAX_ANSWER_BYTES: the student's, reported as returning more than the grader accepts."""
