"""Assertion helpers for the notebooks' test cells: each failure says what was
expected, what came back, and where to look."""
import numpy as np
import torch


def _as_array(x):
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_shape(value, expected, name):
    """Assert that `value` (tensor or array) has shape `expected`; None in `expected` matches any size."""
    if not hasattr(value, "shape"):
        raise AssertionError(f"{name}: expected a tensor of shape {expected}, got a {type(value).__name__}")
    shape = tuple(value.shape)
    if len(shape) != len(expected) or any(e is not None and e != s for e, s in zip(expected, shape)):
        raise AssertionError(f"{name}: expected shape {tuple(expected)}, got {shape}")


def check_close(actual, expected, name, atol=1e-5, rtol=1e-5, hint=""):
    """Assert that two tensors/arrays/numbers agree within tolerance."""
    a, e = _as_array(actual), _as_array(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{name}: expected shape {e.shape}, got {a.shape}. {hint}".strip())
    if not np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=False):
        worst = np.unravel_index(np.nanargmax(np.abs(a - e)) if a.size else 0, a.shape) if a.size else ()
        raise AssertionError(f"{name}: values differ (largest gap at index {tuple(int(i) for i in worst)}: "
                             f"got {a[worst]!r}, expected {e[worst]!r}). {hint}".strip())


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
