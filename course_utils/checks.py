"""Assertion helpers for the notebooks' test cells: each failure says what was
expected, what came back, and where to look. What a test forbids is refusals.py's; what stands in for a
student's earlier part, charged_once.py's; what is active while a test runs, ambient.py's."""
import numpy as np
import torch

from . import diagnosis


def _as_array(x, name="value"):
    """A plain ndarray of x; tensors and arrays must be plain (a subclass could lie in comparisons)."""
    if isinstance(x, torch.Tensor):
        return plain_tensor(x, name).numpy()
    if isinstance(x, np.ndarray):
        return plain_array(x, name)
    if isinstance(x, (float, int)) and type(x) not in (int, float, bool) and not isinstance(x, np.generic):
        return np.asarray(plain_float(x, name))
    return np.asarray(x)


def check_shape(value, expected, name):
    """Assert that `value` (tensor or array) has shape `expected`; None in `expected` matches any size.
    A wrong shape is described: which dims are swapped, extra, missing or one off."""
    if not hasattr(value, "shape"):
        raise AssertionError(f"{name}: expected a tensor of shape {tuple(expected)}, got {kind_of(value)}")
    if isinstance(value, torch.Tensor):
        plain_tensor(value, name)
    elif isinstance(value, np.ndarray):
        plain_array(value, name)
    shape = tuple(int(s) for s in value.shape)
    if len(shape) != len(expected) or any(e is not None and e != s for e, s in zip(expected, shape)):
        raise AssertionError(f"{name}: expected shape {tuple(expected)}, got {shape}: "
                             f"{diagnosis.describe_shape(shape, expected)}.")


def check_close(actual, expected, name, atol=1e-5, rtol=1e-5, hint="", mistakes=None):
    """Assert that two tensors/arrays/numbers agree within tolerance; a failure says why, in this order:
    a wrong shape described, NaN or inf located, the one known mistake the values match named, then `hint`.

    mistakes: {sentence naming a mistake and its fix: the value that mistake gives on these inputs, or a
    zero-argument function computing it (called only when the check fails)}. A sentence is printed only when
    the answer matches its value and no other's (course_utils.diagnosis)."""
    a, e = _as_array(actual, name), _as_array(expected, name + " (expected)")
    if a.shape != e.shape:
        raise AssertionError(f"{name}: expected shape {e.shape}, got {a.shape}: "
                             f"{diagnosis.describe_shape(a.shape, e.shape)}. {hint}".strip())
    numeric = a.dtype.kind in "biufc" and e.dtype.kind in "biufc"
    if numeric and np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=False):
        return
    if not numeric and np.array_equal(a, e):
        return
    found = diagnosis.fingerprint(a, e, mistakes, atol, rtol) if mistakes and numeric else None
    where = _where(a, e, numeric)
    if found is not None:
        raise AssertionError(diagnosis.diagnosed(f"{found} [{name}: {where}]"))
    bad = diagnosis.nonfinite(a, e) if numeric else None
    if bad is not None:
        raise AssertionError(f"{name}: {bad}. {hint}".strip())
    generic = diagnosis.GENERIC if mistakes and hint else ""
    raise AssertionError(f"{name}: values differ. {generic}{hint}".strip() + f" [{where}]")


def _where(a, e, numeric):
    """Where two same-shaped arrays differ most, with the answer's value there (never the expected one: a hidden
    test's expected values stay the grader's)."""
    if a.size == 0:
        return "empty arrays"
    if not numeric:
        worst = tuple(int(i) for i in np.argwhere(a != e)[0]) if a.shape else ()
        return f"first difference at index {worst}, where yours is {a[worst].item()!r}"
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64) - e)
    gap = np.where(np.isnan(gap), np.inf, gap)
    worst = np.unravel_index(int(np.argmax(gap)), a.shape) if a.shape else ()
    worst = tuple(int(i) for i in worst)
    return f"largest gap at index {worst}, where yours is {a[worst].item()!r}"


def kind_of(value):
    """What a value is, in the student's words: "None", "a list", "a tensor of shape (2, 3)". An object the
    grader holds only a handle to (the student's own object, when graded) is named by what it is not."""
    if value is None:
        return "None"
    if type(value) in _PLAIN_TENSORS or type(value) is np.ndarray:
        return f"a {'tensor' if isinstance(value, torch.Tensor) else 'numpy array'} of shape {tuple(value.shape)}"
    if type(value).__module__.startswith("autograder."):
        return "an object that is not plain data (not a tensor, an array, a number, a string or a list of them)"
    return f"a {type(value).__name__}" + (f" ({type(value).__qualname__})" if "." in type(value).__qualname__ else "")


def check_true(condition, message):
    """Assert with a message that tells the student what went wrong."""
    if not bool(condition):
        raise AssertionError(message)


def require(value, what):
    """Stop a cell early, with a hint, when an earlier step has not produced `value` yet.

    Used by cells that need the result of an exercise: `require(model, "a trained
    model: finish Exercises 1-4 and run the training cell")`.
    """
    if value is None:
        raise NotImplementedError(f"This cell needs {what}.")
    return value


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def plain_tensor(value, name, dtype=None):
    """`value` as a plain, detached CPU `torch.Tensor`; refuses subclasses and other types.

    dtype: when given, the tensor must have exactly this dtype (the one the exercise asks for).
    """
    if type(value) not in _PLAIN_TENSORS:
        kind = "a subclass of torch.Tensor" if isinstance(value, torch.Tensor) else kind_of(value)
        raise AssertionError(f"{name}: expected a plain torch.Tensor, got {kind}. "
                             "Return the tensor your computation produced.")
    value = torch.Tensor.detach(value).cpu()  # a plain Tensor, a Parameter's data included
    if dtype is not None and value.dtype != dtype:
        raise AssertionError(f"{name}: expected dtype {dtype}, got {value.dtype}.")
    return value


def plain_array(value, name, dtype=None):
    """`value` as a plain `numpy.ndarray` (a numpy scalar becomes a 0-d array); refuses subclasses."""
    if type(value) is not np.ndarray and not (isinstance(value, np.generic) and type(value).__module__ == "numpy"):
        kind = "a subclass of numpy.ndarray" if isinstance(value, np.ndarray) else kind_of(value)
        raise AssertionError(f"{name}: expected a plain numpy.ndarray, got {kind}.")
    value = np.asarray(value)
    if dtype is not None and value.dtype != np.dtype(dtype):
        raise AssertionError(f"{name}: expected dtype {np.dtype(dtype)}, got {value.dtype}.")
    return value


def plain_float(value, name):
    """`value` (a Python/numpy number, or a one-element plain tensor or array) as a built-in float."""
    if type(value) in (int, float, bool):
        return float(value)
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and np.issubdtype(type(value), np.number):
        return float(value.item())
    if type(value) in _PLAIN_TENSORS or type(value) is np.ndarray:
        array = plain_tensor(value, name).numpy() if type(value) is not np.ndarray else value
        if array.size != 1:
            raise AssertionError(f"{name}: expected a single number, got an array of shape {tuple(array.shape)}.")
        return float(array.reshape(()).item())
    raise AssertionError(f"{name}: expected a number (int or float), got {kind_of(value)}.")


class ForbiddenCall(AssertionError):
    """Raised when an answer calls an operator the exercise asks the student to build."""

    def __init__(self, message, forbidden=""):
        super().__init__(message)
        self.forbidden = forbidden


def refusal(name, reason):
    """The ForbiddenCall that refuses `name` (a dotted operator name) for `reason`."""
    return ForbiddenCall(f"{name} is not allowed here: {reason}.", forbidden=name)
