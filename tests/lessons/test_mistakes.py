"""Each lesson's hidden tests catch the common mistakes, charge each one once, and pass other correct answers.

A case runs every graded test cell of solutions/<lesson>.ipynb, in notebook order, after the
set-up (run once per lesson) and the solution cells, with one answer redefined by the code in
tests/mistakes/lessonNN.py. A mistake must fail the test cell it is listed under and pass every
other one (issue 19 section 8: one bug costs the points of its own exercise only), except the
cells a lesson lists for it in ALSO_FAILS ({mistake: (test cells, why no test can avoid it)});
another correct answer must pass every cell. Lessons are found from the data modules, so a new
lessonNN.py (LESSON, MISTAKES, ALTERNATIVES) is picked up as it is.

A mistake also carries the words its diagnosis must contain: the message the student reads on the failed test
cell must name the mistake (issue 55), checked case by case; a lesson may list in UNNAMED the few mistakes
no message names yet (each with why), and at least NAMED_SHARE of each lesson's mistakes must be named.

The cases are independent, so the `verdicts` fixture runs them all up front in two processes (a
lesson's cases in chunks, each process keeping the lessons it has set up), and the tests read the
verdicts: the same checks, in half the time on two cores.
"""
import importlib
import multiprocessing
import pkgutil
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests import mistakes
from tests.nbtools import LessonCode

DATA = [importlib.import_module(f"tests.mistakes.{m.name}") for m in pkgutil.iter_modules(mistakes.__path__)
        if m.name.startswith("lesson")]
MISTAKES = [(d.LESSON, name, case[0], case[1]) for d in DATA for name, case in d.MISTAKES.items()]
WORDS = {(d.LESSON, name): (case[2],) if isinstance(case[2], str) else tuple(case[2])
         for d in DATA for name, case in d.MISTAKES.items() if len(case) > 2}
UNNAMED = {(d.LESSON, name): why for d in DATA for name, why in getattr(d, "UNNAMED", {}).items()}
NAMED_SHARE = 0.9
ALTERNATIVES = [(d.LESSON, name, *case) for d in DATA for name, case in getattr(d, "ALTERNATIVES", {}).items()]
ALSO_FAILS = {(d.LESSON, name): set(cells) for d in DATA for name, (cells, _why) in getattr(d, "ALSO_FAILS", {}).items()}
# errors that mean the case's own code is broken (a typo), not that a test caught it
_BROKEN_CASE = ("NameError", "SyntaxError", "IndentationError")
CHUNK = 12  # cases per task: small enough to balance the two processes, large enough to reuse a lesson's set-up
_LESSONS = {}  # per process: {lesson: LessonCode}, set up once


class Failure:
    """A test cell's failure as it crosses processes: the exception's kind and message."""

    def __init__(self, error):
        self.kind, self.message = type(error).__name__, str(error)

    def __repr__(self):
        return f"{self.kind}: {self.message[:200]}"


def run_cases(lesson, codes):
    """[{test cell: None or Failure}] for each code, every graded test cell run with it in place (in a worker)."""
    import torch
    torch.set_num_threads(1)  # two workers share the cores
    if lesson not in _LESSONS:
        _LESSONS[lesson] = LessonCode(lesson)
    return [{t: None if e is None else Failure(e) for t, e in _LESSONS[lesson].run_all_test_cells(code).items()}
            for code in codes]


@pytest.fixture(scope="module")
def verdicts(request):
    """{(lesson, code): {test cell: None or Failure}} for every case of the lessons this run selected (`-k 03_`
    runs lesson 03's alone), computed in two processes."""
    from tests.full_run import selected
    wanted = selected(request, "verdicts", "lesson")
    codes = {}
    for lesson, _name, _test_id, code in MISTAKES + ALTERNATIVES:
        if lesson in wanted and code not in codes.setdefault(lesson, []):
            codes[lesson].append(code)
    tasks = [(lesson, cs[i:i + CHUNK]) for lesson, cs in codes.items() for i in range(0, len(cs), CHUNK)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = [(lesson, chunk, pool.submit(run_cases, lesson, chunk)) for lesson, chunk in tasks]
        return {(lesson, code): verdict for lesson, chunk, job in jobs for code, verdict in zip(chunk, job.result())}


@pytest.fixture(scope="module")
def test_cells():
    return {d.LESSON: set(LessonCode(d.LESSON).tests) for d in DATA}


def _ids(cases):
    return [f"{c[0][:2]}: {c[1]}" for c in cases]


def _describe(failures):
    return "; ".join(f"{test_id}: {e!r}" for test_id, e in failures.items())


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=_ids(MISTAKES))
def test_mistake_is_caught(verdicts, test_cells, lesson, name, test_id, code):
    assert test_id in test_cells[lesson], f"{lesson} has no graded test cell {test_id!r}"
    failure = verdicts[lesson, code][test_id]
    assert failure is not None, f"{test_id} passed with the mistake in place"
    # a typo in the mistake's own code must not count as a caught mistake
    assert failure.kind not in _BROKEN_CASE, repr(failure)


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=_ids(MISTAKES))
def test_mistake_costs_only_its_own_exercise(verdicts, lesson, name, test_id, code):
    allowed = ALSO_FAILS.get((lesson, name), set())
    others = {t: e for t, e in verdicts[lesson, code].items() if t != test_id and t not in allowed and e is not None}
    assert not others, f"the mistake for {test_id} also fails {_describe(others)}"


@pytest.mark.parametrize("lesson, name, test_id, code", ALTERNATIVES, ids=_ids(ALTERNATIVES))
def test_other_correct_answer_passes(verdicts, test_cells, lesson, name, test_id, code):
    assert test_id in test_cells[lesson], f"{lesson} has no graded test cell {test_id!r}"
    failures = {t: e for t, e in verdicts[lesson, code].items() if e is not None}
    assert not failures, f"a correct answer for {test_id} fails {_describe(failures)}"


def named(failure, words):
    """Whether the part of a failure's message the student's feedback shows contains every one of `words` (case
    and spacing ignored)."""
    from autograder.shown import MAX_MESSAGE
    text = " ".join(failure.message[:MAX_MESSAGE - 3].lower().split())
    return all(" ".join(w.lower().split()) in text for w in words)


@pytest.mark.parametrize("lesson, name, test_id, code", MISTAKES, ids=_ids(MISTAKES))
def test_mistake_is_named(verdicts, lesson, name, test_id, code):
    """The message on the mistake's own test cell names it (the words listed with the mistake)."""
    words = WORDS.get((lesson, name))
    assert words, f"{name!r} carries no diagnosis words: (test cell, code, words the message must contain)"
    failure = verdicts[lesson, code][test_id]
    if failure is None:
        pytest.skip("not caught (test_mistake_is_caught fails)")
    if (lesson, name) in UNNAMED:
        assert not named(failure, words), f"{name!r} is named now: take it out of UNNAMED"
        pytest.xfail(UNNAMED[lesson, name])
    assert named(failure, words), f"the message does not contain {words}: {failure!r}"


@pytest.mark.parametrize("lesson", sorted({d.LESSON for d in DATA}))
def test_most_mistakes_are_named(lesson):
    """At least NAMED_SHARE of a lesson's mistakes are named by their message (UNNAMED are the rest)."""
    names = [name for les, name, _t, _c in MISTAKES if les == lesson]
    unnamed = [name for name in names if (lesson, name) in UNNAMED]
    assert len(names) - len(unnamed) >= NAMED_SHARE * len(names), \
        f"{len(unnamed)} of {len(names)} mistakes of {lesson} are unnamed: {unnamed}"
