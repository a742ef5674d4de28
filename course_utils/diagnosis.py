"""What a failed check tells the student: the mistake behind it, not only that the values differ.

Three layers, in this order, used by checks.check_close and by the lessons' test cells:

1. pointed probes: a shape that differs is described (two axes swapped, an extra or a missing axis, one
   length off by one), a value that is NaN or infinite is located;
2. mistake fingerprints: the reference computed with each known mistake applied, on the same inputs; when
   the answer matches exactly one of them (and that one differs from the right answer), the message names it;
3. only then a generic hint, phrased as the rule ("None of the mistakes this check knows matches. ...").

A diagnosed message starts with DIAGNOSIS, so that the class report can group a class's failures by the
mistake they made. Everything here runs where the test runs (the grader's side, when graded): the hidden
inputs and expected values never reach the student's kernel.
"""
import contextlib

import numpy as np

DIAGNOSIS = "Diagnosis: "
GENERIC = "None of the mistakes this check knows matches. "


def diagnosed(text):
    """A message that names the student's mistake (the class report groups failures by it)."""
    return DIAGNOSIS + text


def mistake_of(message):
    """The mistake a diagnosed message names (its text up to the first " [" or the end), else None."""
    if not isinstance(message, str) or DIAGNOSIS not in message:
        return None
    text = message.split(DIAGNOSIS, 1)[1]
    return text.split(" [", 1)[0].strip()


# ------------------------------------------------------------------ shapes

def describe_shape(got, expected):
    """A sentence saying how shape `got` differs from `expected` (tuples; None in expected matches any size)."""
    got, expected = tuple(got), tuple(expected)
    fits = lambda g, e: e is None or g == e  # noqa: E731
    if len(got) == len(expected):
        wrong = [i for i, (g, e) in enumerate(zip(got, expected)) if not fits(g, e)]
        if len(wrong) == 2 and fits(got[wrong[0]], expected[wrong[1]]) and fits(got[wrong[1]], expected[wrong[0]]):
            return f"dims {wrong[0]} and {wrong[1]} are swapped (a transpose or permute of the wrong pair?)"
        if sorted(map(str, got)) == sorted(map(str, expected)) and len(wrong) > 2:
            return "the right sizes in the wrong order (permute the axes)"
        if len(wrong) == 1:
            i = wrong[0]
            g, e = got[i], expected[i]
            off = {1: " (one too many)", -1: " (one short)"}.get(g - e, "") if e is not None else ""
            return f"dim {i} has size {g} where {e} is expected{off}"
        return f"{len(wrong)} dims differ"
    if len(got) == len(expected) + 1:
        for i in range(len(got)):
            if all(fits(g, e) for g, e in zip(got[:i] + got[i + 1:], expected)):
                if got[i] == 1:
                    return f"an extra dim of size 1 at position {i} (squeeze it, or index it away)"
                return f"an extra dim of size {got[i]} at position {i}"
    if len(got) + 1 == len(expected):
        for i in range(len(expected)):
            if all(fits(g, e) for g, e in zip(got, expected[:i] + expected[i + 1:])):
                size = expected[i]
                return (f"dim {i}" + (f" (size {size})" if size is not None else "") +
                        " is missing: was it summed, averaged or indexed away?")
    return f"{len(got)} dims where {len(expected)} are expected"


# ------------------------------------------------------------------ values

def nonfinite(actual, expected):
    """A sentence locating NaN or infinite entries of `actual` where `expected` is finite, else None."""
    bad = ~np.isfinite(actual) & np.isfinite(expected)
    if not bad.any():
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    kind = "NaN" if np.isnan(actual[first]) else "inf"
    where = "every entry" if bad.all() else f"{int(bad.sum())} of {bad.size} entries (first at index {first})"
    return f"{kind} in {where}, where finite values are expected"


def _close(a, b, atol, rtol):
    try:
        b = np.asarray(b, dtype=np.float64) if not np.iscomplexobj(b) else np.asarray(b)
        return a.shape == b.shape and bool(np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
    except (TypeError, ValueError):
        return False


def fingerprint(actual, expected, mistakes, atol, rtol):
    """The one mistake of `mistakes` ({sentence: value or zero-argument callable}) whose value `actual` matches
    while that value differs from `expected`, else None (no match, or more than one)."""
    a = np.asarray(actual, dtype=np.float64) if not np.iscomplexobj(actual) else np.asarray(actual)
    matches = []
    for sentence, value in mistakes.items():
        try:
            value = value() if callable(value) else value
            value = _plain(value)
        except Exception:  # noqa: BLE001: a mistake that cannot be computed on these inputs does not match
            continue
        if _close(a, value, atol, rtol) and not _close(np.asarray(expected, dtype=np.float64), value, atol, rtol):
            matches.append(sentence)
    return matches[0] if len(matches) == 1 else None


def _plain(value):
    """A mistake's value as an ndarray (tensors detached and moved to the CPU)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def number_mistake(value, expected, mistakes, rtol=0.01):
    """For a concept answer: the sentence of the one known wrong number `value` equals (within rtol), else None.

    mistakes: {sentence: the wrong number that mistake gives}. The right value is never printed."""
    hits = [s for s, wrong in mistakes.items()
            if np.isclose(value, wrong, rtol=rtol, atol=0) and not np.isclose(expected, wrong, rtol=rtol, atol=0)]
    return hits[0] if len(hits) == 1 else None


# ------------------------------------------------------------------ crashes

_PASSED_ON = (ArithmeticError, AttributeError, LookupError, RuntimeError, TypeError, ValueError)


@contextlib.contextmanager
def case(label, why=""):
    """Run a test's call as one named case: an error it raises is reported with the case's label and `why`.

    `with cu.case("MultiHeadAttention with keys of another length", why="project keys and values from `key` and
    `value`"):` turns a RuntimeError there into an AssertionError that says which case raised and what it means.
    NotImplementedError (an unfinished exercise), assertions and the grader's own errors pass through unchanged."""
    try:
        yield
    except NotImplementedError:
        raise
    except _PASSED_ON as e:
        if not _students(e):
            raise
        # the reason first: a long crash text must not push it past what the feedback page shows
        raise AssertionError(f"{label} raised {type(e).__name__}" + (f": {why}" if why else "")
                             + f" [{_short(e)}]") from None


def _students(error):
    """Whether an error can be the student's code's: Python's own classes, torch's and numpy's. The grader's and
    the notebook client's (a kernel that died is nbclient's DeadKernelError, a RuntimeError) pass through."""
    module = type(error).__module__.split(".")[0]
    return module in ("builtins", "torch", "numpy", "__main__", "__lesson__", "__grader_test__")


def _short(error, limit=300):
    text = str(error).strip() or "(no message)"
    return text if len(text) <= limit else text[:limit] + "..."


@contextlib.contextmanager
def raises(expected, label, why=""):
    """The block must raise `expected` (an exception class): `with cu.raises(ValueError, "rope with odd d = 7",
    why="the exercise asks for a ValueError when d is odd"):`. Another error or none is an AssertionError
    that names what happened instead."""
    try:
        yield
    except expected as e:
        if not _students(e):  # (a dead kernel is a RuntimeError: never the expected error's success)
            raise
        return
    except NotImplementedError:
        raise
    except _PASSED_ON as e:
        if not _students(e):
            raise
        # the crash's own text left out where `why` says what was asked: its advice is about another problem
        raise AssertionError(f"{label} raised {type(e).__name__}, not {expected.__name__}"
                             + (f": {why}" if why else f" ({_short(e, 160)})")) from None
    raise AssertionError(f"{label} returned without raising {expected.__name__}" + (f": {why}" if why else ""))
