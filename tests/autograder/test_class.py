"""A hostile class through `collect`, `grade`, `feedback` and `export`: every bad submission
gets the score and the flag it deserves, and none stops the others.

The class (tests/autograder/hostile.py) is part of the one graded class of the test run
(tests/graded_class.py, the `graded_class` fixture): collected from a zip with every lesson's
submissions, graded once with --jobs 2. These tests only read what came out. The default run grades the small
class hostile.FAST_CLASS, and runs the tests that read only its students (the student a test is parametrised
with, and those its `students` mark names); `--full` grades and checks the whole class (tests/full_run.py).
"""
import csv
import html
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import cells
from autograder.run import grade
from autograder.sandbox.limits import Limits
from tests.autograder import tiny
from tests.autograder.hostile import (FEEDBACK_FOR, KERNEL_PATCHES, QUICKEST, TEST_LESSONS, last_function_answer,
                                      graded_test_ids, without_demonstrations)
from tests.prerequisites import require, why_no_full_sandbox
from tests.nbtools import SOLUTIONS, fill_solutions, grade_id, load, submit

@pytest.fixture(scope="module", params=TEST_LESSONS)
def graded(request, graded_class):
    return graded_class.of_lesson(request.param)


def max_points(g):
    return g["results"]["perfect"].max_score


def points_of_last(g):
    """Points of the test cell of the last exercise (the one the bad cells break)."""
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    return [c.metadata["nbgrader"]["points"] for c in source.cells if grade_id(c) == graded_test_ids(source)[-1]][0]


def points_of_test_after(g):
    """Points of the first test cell after the answer cell last_function_answer() picks."""
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    gid = last_function_answer(source)
    cells = source.cells[[grade_id(c) for c in source.cells].index(gid):]
    return next(c.metadata["nbgrader"]["points"] for c in cells if grade_id(c) in graded_test_ids(source))


def autograded(g, student):
    return load(g["course"] / "autograded" / student / g["lesson"] / f"{g['lesson']}.ipynb")


def test_collect_places_every_student_and_reports_the_stray_file(graded):
    placed = {student for _, student, lesson, _ in graded["collected"].placed if lesson == graded["lesson"]}
    assert set(graded["students"]) <= placed
    problems = dict(graded["collected"].problems)
    assert problems.pop("perfect/notes.txt") == "not a notebook (.ipynb)"
    skipped = " ".join(f"{source}: {reason}" for source, reason in graded["collected"].skipped)
    assert "linked/" in skipped and "symbolic link" in skipped  # listed, never followed into solutions/
    assert not any("linked" in student for _, student, _, _ in graded["collected"].placed)
    assert problems and all(source.startswith("bomb/") for source in problems), problems  # too big, or no notebook


def test_every_student_is_graded_and_in_the_csv(graded):
    assert set(graded["students"]) <= set(graded["results"])
    with open(graded["grades_csv"]) as f:
        rows = [r for r in csv.DictReader(f) if r["assignment"] == graded["lesson"]]
    assert {r["student_id"] for r in rows} == set(graded["results"])
    assert list(rows[0])[:4] == ["assignment", "duedate", "timestamp", "student_id"]


@pytest.mark.parametrize("student", ["perfect", "colab_renamed", "edited_test", "duplicated_cell",
                                     "giant_output", "stderr_warnings", "flood", "always_equal", "snoop", "leaky",
                                     "tampered", "tampered_colab", "huge", "markdown_test", "loop_i"])
def test_full_marks(graded, student):
    r = graded["results"][student]
    assert r.status == "graded" and r.score == max_points(graded), r


@pytest.mark.parametrize("student", ["blank", "invalid_json", "monkeypatch"])
def test_zero(graded, student):
    assert graded["results"][student].score == 0, graded["results"][student]


@pytest.mark.students("partial")
def test_partial_scores_in_between(graded):
    assert 0 < graded["results"]["partial"].score < max_points(graded)


@pytest.mark.parametrize("student", ["syntax_error", "infinite_loop", "memory_bomb", "os_exit", "sys_exit",
                                     "deleted_test"])
def test_breaking_the_last_exercise_loses_only_its_points(graded, student):
    r = graded["results"][student]
    assert r.score == max_points(graded) - points_of_last(graded), r


@pytest.mark.parametrize("student, flag", [("monkeypatch", "patch:"), ("always_equal", "eq:"), ("snoop", "reach:"),
                                           ("deleted_test", "was deleted"), ("edited_test", "was edited"),
                                           ("duplicated_cell", "appears 2 times"), ("invalid_json", "invalid:"),
                                           ("os_exit", "kernel died"), ("huge", "size:"),
                                           ("markdown_test", "turned into a markdown cell")])
def test_flagged_for_review(graded, student, flag):
    flags = graded["results"][student].flags
    assert any(flag in f for f in flags), flags
    assert student in graded["summary"].read_text()


@pytest.mark.parametrize("student", ["perfect", "blank", "partial", "colab_renamed", "stderr_warnings", "loop_i"])
def test_honest_submissions_are_not_flagged(graded, student):
    assert graded["results"][student].flags == []


@pytest.mark.students("infinite_loop")
def test_infinite_loop_is_stopped_by_the_cell_timeout(graded):
    assert any("timed out" in e for e in graded["results"]["infinite_loop"].events)


@pytest.mark.students("giant_output")
def test_giant_output_is_truncated(graded):
    path = graded["course"] / "autograded" / "giant_output" / graded["lesson"] / f"{graded['lesson']}.ipynb"
    assert path.stat().st_size < 2_000_000


@pytest.mark.students("snoop")
def test_kernel_cannot_see_or_write_grader_files(graded):
    require(why_no_full_sandbox())  # without bubblewrap a kernel sees the course folder
    text = json.dumps([o for c in autograded(graded, "snoop").cells for o in c.get("outputs", [])])
    assert "SNOOP-FOUND []" in text, text[:2000]
    assert "SNOOP-DENIED" in text and "SNOOP-WROTE" not in text, text[:2000]


def test_feedback_does_not_reveal_hidden_tests(graded):
    source = load(graded["course"] / "source" / graded["lesson"] / f"{graded['lesson']}.ipynb")
    hidden = [line.strip() for c in source.cells for block in c.source.split("### BEGIN HIDDEN TESTS")[1:]
              for line in block.split("### END HIDDEN TESTS")[0].splitlines() if len(line.strip()) >= 12]
    release = (graded["course"] / "release" / graded["lesson"] / f"{graded['lesson']}.ipynb").read_text()
    visible = {line.strip() for c in load(graded["course"] / "release" / graded["lesson"] / f"{graded['lesson']}.ipynb").cells
               for line in c.source.splitlines()}
    hidden = [line for line in hidden if line not in visible and release]
    assert hidden and len(graded["feedback"]) == len([s for s in FEEDBACK_FOR if s in graded["students"]])
    for page in graded["feedback"]:
        student = page.relative_to(graded["course"] / "feedback").parts[0]
        submitted = load(graded["course"] / "submitted" / student / graded["lesson"] / f"{graded['lesson']}.ipynb")
        own = {line.strip() for c in submitted.cells if not cells.is_test(c) for line in c.source.splitlines()}
        lines = {line.strip() for line in html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).splitlines()}
        # whole lines (`s = ...` is in `scores = ...`), less those the student wrote in their own cells (a hidden
        # reference may say what a correct answer says: the page shows the student's answer back to them)
        leaked = [line for line in hidden if line in lines and line not in own]
        assert not leaked, f"{page}: {leaked[:3]}"


@pytest.mark.students("stderr_warnings")
def test_student_warnings_are_shown_but_cost_nothing(graded):
    """Warnings, log lines, sys.stderr and fd 2 from a correct answer while a test runs cost nothing, and
    never reach the test cell: the student's code runs inside the grader's requests, whose output is dropped."""
    nb = autograded(graded, "stderr_warnings")
    answer_text = json.dumps([o for c in nb.cells if not cells.is_test(c) for o in c.get("outputs", [])])
    assert "student code warns" in answer_text  # outside the tests, the student sees their warning
    tests = [c for c in nb.cells if cells.is_test(c)]
    assert all(c.outputs == [] for c in tests), [c.outputs for c in tests if c.outputs]
    test_text = json.dumps([c.get("metadata", {}) for c in tests]) + json.dumps([c.outputs for c in tests])
    for noise in ("a warning from student code, in a test", "a log line from student code",
                  "stderr from student code", "fd 2 from student code"):
        assert noise not in test_text, noise
    assert graded["results"]["stderr_warnings"].score == max_points(graded)


@pytest.mark.students("dies_in_test")
def test_a_kernel_killed_inside_a_test_is_a_crash_of_that_test_cell_and_nothing_else(graded):
    """The test's request sees the kernel die: the crash is named at the test cell, no integrity check waits for
    an answer that cannot come, and the cells after it are not run."""
    r = graded["results"]["dies_in_test"]
    nb = autograded(graded, "dies_in_test")
    index = next(i for i, c in enumerate(nb.cells) if cells.is_test(c) and "DeadKernelError" in json.dumps(c.outputs))
    assert r.flags == [f"runtime: the kernel died in cell {index} (os._exit, a crash, or a resource limit) "
                       "(later cells not run)"], r.flags
    assert r.score < max_points(graded)


@pytest.mark.students("garbled")
def test_a_kernel_whose_messages_cannot_be_read_is_a_crash_not_a_failed_grading(graded):
    """An answer cell replaces how the kernel packs its messages: jupyter_client cannot read them (it raised
    ValueError, and the whole notebook was a failed grading scored 0). Now it is a crash from that cell on."""
    r = graded["results"]["garbled"]
    assert r.status == "graded" and 0 < r.max_score and r.score < max_points(graded), r
    assert any(f.startswith("runtime: the kernel sent messages the grader cannot read from cell ") and
               f.endswith("(later cells not run)") for f in r.flags), r.flags


def _csv_row(g, student):
    with open(g["grades_csv"]) as f:
        return next(r for r in csv.DictReader(f) if r["student_id"] == student and r["assignment"] == g["lesson"])


# student: (score: "zero" | "all but wrapped" | "full", substrings that must be among the flags); "wrapped" is
# the test of last_function_answer, whose answer the lying student wraps
CHEATS = {
    "displayhook": ("zero", ["kernel: line", "uses .displayhook"]),
    "lying": ("all but wrapped", ["lie: line", "subclasses float", "subclasses Tensor", "subclasses ndarray"]),
    "rebind": ("full", ["integrity: course_utils.check_close was replaced",
                        "integrity: course_utils.checks.plain_float was replaced",
                        "integrity: torch.allclose was replaced", "first seen after test cell"]),
    "deep_patch": ("full", ["patch: line", "integrity: course_utils.check_true had its code or defaults changed",
                            "kernel: line", "integrity: an IPython AST transformer was added or removed"]),
    "leaky": ("full", ["introspect: line", "uses ._getframe", "names 'In'"]),
    "tampered": ("full", ["tamper: cell", "(bonus): claims nbgrader metadata",
                          "(softmax): nbgrader metadata was changed (grade True -> False, points 100 -> 0)",
                          "(test_renamed): nbgrader metadata was changed (grade_id 'test_renamed'"]),
    "tampered_colab": ("full", ["tamper: cell", "(bonus): claims nbgrader metadata",
                                "nbgrader metadata was changed (grade True -> False, points 100 -> 0)",
                                "(test_renamed): nbgrader metadata was changed (grade_id 'test_renamed'"]),
}


@pytest.mark.parametrize("student", sorted(CHEATS))
def test_cheats_get_the_exact_score_the_flag_and_the_csv_row(graded, student):
    kind, expected_flags = CHEATS[student]
    if student.startswith("tampered") and graded["lesson"] != QUICKEST:  # the flags name lesson 03's cells
        expected_flags = expected_flags[:1]
    full = max_points(graded)
    score = {"zero": 0, "all but wrapped": full - points_of_test_after(graded), "full": full}[kind]
    r = graded["results"][student]
    assert (r.status, r.score, r.max_score) == ("graded", score, full), r
    text = "\n".join(r.flags)
    assert all(f in text for f in expected_flags), (expected_flags, r.flags)
    row = _csv_row(graded, student)
    assert (float(row["score"]), float(row["max_score"])) == (score, full), row
    assert student in graded["summary"].read_text()


@pytest.mark.students("displayhook")
def test_a_display_result_in_a_test_cell_earns_nothing(graded):
    """nbgrader reads a test cell's execute_result as partial credit: a test cell keeps only its error, and
    what the student's code displays during a test never reaches it."""
    for cell in (c for c in autograded(graded, "displayhook").cells if cells.is_test(c)):
        assert [o.output_type for o in cell.outputs] == ["error"], cell.outputs
        assert "full marks" not in json.dumps(cell.outputs) + json.dumps(cell.metadata)


@pytest.mark.students("rebind", "deep_patch")
def test_patched_checks_change_no_verdict_and_cost_no_honest_point(graded):
    """The tests run on the grader's side: a patched check in the kernel neither passes nor fails a test."""
    for student in ("rebind", "deep_patch"):
        tests = [c for c in autograded(graded, student).cells if cells.is_test(c)]
        assert tests and all(c.outputs == [] for c in tests), (student, [c.outputs for c in tests if c.outputs])


@pytest.mark.parametrize("student", sorted(KERNEL_PATCHES) + ["thief"])
@pytest.mark.students("honest_twin")
def test_a_patch_in_the_kernel_earns_exactly_what_its_honest_twin_earns(graded, student):
    if student == "thief":  # without bubblewrap it reads the whole machine, and its kernel runs out of memory
        require(why_no_full_sandbox())
    twin, r = graded["results"]["honest_twin"], graded["results"][student]
    assert 0 < twin.score < twin.max_score, twin
    assert (r.status, r.score, r.max_score) == ("graded", twin.score, twin.max_score), r
    row = _csv_row(graded, student)
    assert (float(row["score"]), float(row["max_score"])) == (twin.score, twin.max_score), row


def _hidden_lines(g):
    source = load(g["course"] / "source" / g["lesson"] / f"{g['lesson']}.ipynb")
    visible = {line.strip() for c in load(g["course"] / "release" / g["lesson"] / f"{g['lesson']}.ipynb").cells
               for line in c.source.splitlines()}
    hidden = [line.strip() for c in source.cells for block in c.source.split("### BEGIN HIDDEN TESTS")[1:]
              for line in block.split("### END HIDDEN TESTS")[0].splitlines() if len(line.strip()) >= 12]
    return [line for line in hidden if line not in visible]


@pytest.mark.students("thief")
def test_no_file_the_kernel_can_open_and_nothing_in_its_history_holds_a_hidden_test(graded):
    require(why_no_full_sandbox())  # without bubblewrap a kernel can open the course's source notebooks
    import base64
    text = json.dumps([o for c in autograded(graded, "thief").cells for o in c.get("outputs", [])])
    loot = base64.b64decode(re.search(r"THIEF-LOOT ([A-Za-z0-9+/=]+)", text).group(1)).decode(errors="replace")
    assert f"{graded['lesson']}.ipynb" in loot or "nbformat" in loot, "the thief read nothing: the probe is broken"
    lines = {line.strip() for line in loot.splitlines()}
    own = {line.strip() for c in graded["students"]["thief"][0].cells for line in c.source.splitlines()}
    hidden = [line for line in _hidden_lines(graded) if line not in own]  # a line of the answers is no secret
    assert hidden and not [line for line in hidden if line in lines or json.dumps(line)[1:-1] in loot]


@pytest.mark.students("leaky")
def test_feedback_shows_no_output_of_student_code_during_tests_and_no_active_html(graded):
    page = next(p for p in graded["feedback"] if "/leaky/" in str(p)).read_text()
    for printed in ("B64 ", "REV ", "SPACED ", "HTML "):  # what the student's code printed during hidden tests
        assert printed not in html.unescape(re.sub(r"<[^>]+>", "", page)), printed
    assert not re.search(r"<script[^>]*>[^<]*window\.PWNED", page), "a script of the student's reached the page"
    assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", page), "an event handler attribute reached the page"
    assert "My notes" in page  # the student's own Markdown still shows, sanitised


@pytest.mark.students("displayhook")
def test_feedback_of_a_failed_test_shows_the_error_message_only(graded):
    page = next(p for p in graded["feedback"] if "/displayhook/" in str(p)).read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "NotImplementedError" in text and "full marks, please" not in text


@pytest.mark.students("os_exit")
def test_a_dead_kernel_is_one_flag(graded):
    flags = graded["results"]["os_exit"].flags
    assert [f for f in flags if f.startswith("runtime:")] == [
        f for f in flags if f.startswith("runtime: the kernel died")] and len(flags) == 1, flags


def test_a_worker_past_the_hard_limit_is_killed_scored_zero_and_flagged(tiny_course, tmp_path, monkeypatch):
    """A worker that never ends (the zygote runs tests.autograder.tiny:stuck_worker instead of the grading worker),
    killed at the 2 s hard limit. (A real worker with a 1 s notebook limit was not stuck: where its kernel started
    within 2 s it reported the notebook's own time limit, graded, in 1 of 3 runs on a quiet machine.)"""
    import functools

    from autograder.run import zygote
    monkeypatch.setattr(zygote, "start", functools.partial(zygote.start, target="tests.autograder.tiny:stuck_worker"))
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    submit(course, lesson, "stuck", load(course / "release" / lesson / f"{lesson}.ipynb"))
    [r] = grade(course, [lesson], limits=Limits(notebook_timeout=1, hard_limit_grace=1), log=lambda *_: None)
    assert r.status == "failed" and r.score == 0 and r.max_score > 0, r
    assert any("hard limit" in f for f in r.flags), r.flags
    assert list((course / ".grading" / lesson / "stuck").glob("worker.log")), "the worker's log is kept for review"


def test_a_test_the_grader_could_not_run_is_pending_not_zero_in_the_gradebook_and_every_export(tiny_course, tmp_path):
    """test_square's call cannot be sent (a Decimal: a value of a module not every course kernel imports, so the
    grader keeps the request, a fault of its own; a student's kernel can no longer make one, see the next test).
    It is not scored 0: nbgrader's needs_manual_grade, pending in the summary and the exports, flagged `grader:`;
    the score an instructor then types in formgrader is the one that counts."""
    from nbgrader.api import Gradebook

    from autograder.export import export
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    source = course / "source" / lesson / f"{lesson}.ipynb"
    instructor = load(source)
    test = next(c for c in instructor.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_square")
    test.source = "import decimal\nassert square(decimal.Decimal(3)) == 9, 'square(3) should be 9'"
    nbformat.write(instructor, str(source))
    submit(course, lesson, "mute", fill_solutions(load(course / "release" / lesson / f"{lesson}.ipynb"), tiny.lesson()))
    [r] = grade(course, [lesson], log=lambda *_: None)
    assert (r.status, r.score, r.pending) == ("graded", 1, ["test_square"]), r
    assert any(f.startswith("grader: the grader could not run test cell test_square") for f in r.flags), r.flags
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        held = gb.find_grade("test_square", lesson, lesson, "mute")
        assert (held.auto_score, held.needs_manual_grade) == (None, True)
    out = course / "export"
    export(course, out, log=lambda *_: None)
    with open(out / "grades.csv", newline="") as f:
        [row] = [row for row in csv.DictReader(f) if row["student_id"] == "mute"]
    assert (row["raw_score"], row["score"]) == ("pending", "pending")
    with open(out / "canvas.csv", newline="") as f:
        assert list(csv.reader(f))[2][-1] == ""
    assert "## Pending manual grading (1)" in (out / "summary.md").read_text()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # the instructor grades it in formgrader
        held = gb.find_grade("test_square", lesson, lesson, "mute")
        held.manual_score, held.needs_manual_grade = 2, False
        gb.db.commit()
    export(course, out, log=lambda *_: None)
    with open(out / "grades.csv", newline="") as f:
        [row] = [row for row in csv.DictReader(f) if row["student_id"] == "mute"]
    assert float(row["score"]) == 3


BROKEN_KERNELS = {  # each left its test cells pending, flagged `grader:` (issue 56): (code before the answers, score)
    # (one error formatted first: IPython 9 imports pygments the first time it formats one, see test_verdicts.py)
    "audit_hook": ("import sys\nget_ipython().user_expressions({'warm': '1 / 0'})\ndef _hook(event, args):\n    if event == 'marshal.loads':\n        raise RuntimeError()\n"
                   "sys.addaudithook(_hook)\n", 0),
    "swapped": ("import builtins\nbuiltins.BaseException = ZeroDivisionError\n", 0),
    # the hidden test of double (an array) empties the shell's user_expressions: test_square gets no answer
    "mute": ("def _mute(x):\n    if not isinstance(x, int):\n        get_ipython().user_expressions = lambda e: {}\n", 1),
}


def test_a_kernel_the_students_code_broke_is_charged_in_a_real_grading_never_pending(tiny_course, tmp_path):
    """Graded as an instructor grades (sandboxed kernels, the gradebook): an audit hook that kills every request, a
    swapped BaseException and a shell that stops answering each fail their test cells with what the kernel did,
    none pending and no `grader:` flag; the honest copy graded beside them keeps full marks and no flag."""
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    honest = fill_solutions(load(course / "release" / lesson / f"{lesson}.ipynb"), tiny.lesson())
    submit(course, lesson, "honest", honest)
    for student, (code, _) in BROKEN_KERNELS.items():
        nb = nbformat.reads(nbformat.writes(honest), as_version=4)
        answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "double")
        answer.source = code + answer.source.replace("def double(x):\n", "def double(x):\n    _mute(x)\n"
                                                     if student == "mute" else "def double(x):\n")
        submit(course, lesson, student, nb)
    results = {r.student: r for r in grade(course, [lesson], jobs=2, log=lambda *_: None)}
    assert (results["honest"].score, results["honest"].pending, results["honest"].flags) == (3, [], []), results
    for student, (_, score) in BROKEN_KERNELS.items():
        r = results[student]
        assert (r.status, r.score, r.pending) == ("graded", score, []), r
        assert not any(f.startswith(("grader:", "pending:")) for f in r.flags), r.flags


def _processes_with(marker):
    """Process ids whose environment holds `marker` (the grading parent, its workers, and their kernels)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (proc / "environ").read_bytes() and b"State:\tZ" not in (proc / "status").read_bytes():
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def _alive(pid):
    try:
        return b"State:\tZ" not in Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return False


def test_ctrl_c_stops_workers_and_kernels_keeps_finished_grades_and_a_rerun_resumes(tiny_course, tmp_path):
    """SIGINT to `python -m autograder grade` mid-run: nothing keeps running, the finished grade stays, the rest
    is named, and running grade again grades only the rest."""
    import signal
    import subprocess
    import sys
    import time
    import uuid
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    full = fill_solutions(load(course / "release" / lesson / f"{lesson}.ipynb"), tiny.lesson())
    for student in ("first", "second", "third"):
        submit(course, lesson, student, full)
    marker = f"COURSE_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    cmd = [sys.executable, "-m", "autograder", "grade", lesson, "--course", str(course), "--jobs", "1"]
    proc = subprocess.Popen(cmd, env=env, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    kernels = course / ".grading" / lesson / "second" / "kernels.txt"
    deadline = time.monotonic() + 400
    while not (kernels.exists() and kernels.read_text().strip()) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert kernels.exists(), "the second submission's kernel never started"
    kernel_pids = [int(p) for p in kernels.read_text().split()]
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    time.sleep(2)  # let killed processes be reaped
    assert not [p for p in kernel_pids if _alive(p)], "a kernel outlived the interrupted grade"
    assert _processes_with(marker) == [], "a worker or kernel outlived the interrupted grade"
    assert "not graded: " in out and f"{lesson} second" in out and f"{lesson} third" in out, out
    reports = sorted(p.stem for p in (course / "reports" / lesson).glob("*.json"))
    assert reports == ["first"], reports
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        first = gb.find_submission(lesson, "first")
        assert first.score == first.max_score > 0

    again = subprocess.run(cmd, env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skipping 1 submission(s) already graded" in again.stdout, again.stdout
    regraded = {line.split()[1].rstrip(":") for line in again.stdout.splitlines() if line.startswith(lesson)}
    assert regraded == {"second", "third"}, again.stdout
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert all(gb.find_submission(lesson, s).score == gb.find_submission(lesson, s).max_score
                   for s in ("first", "second", "third"))


def test_the_class_hands_in_the_lesson_without_only_its_demonstrations():
    """hostile.without_demonstrations drops the cells no later cell needs (timings, training runs, plots,
    explorers) and keeps every graded cell and every cell a kept one reads from, or may change in place."""
    lesson = QUICKEST
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    light = without_demonstrations(nb, lesson)
    kept = [c.source for c in light.cells]
    dropped = [c.source for c in nb.cells if c.source not in kept]
    assert [c for c in nb.cells if "nbgrader" in c.metadata] == [c for c in light.cells if "nbgrader" in c.metadata]
    assert any("import torch" in source for source in kept)                  # the imports every cell needs
    assert any("def train_lookup" in source for source in dropped)          # a training run
    assert any("attention_explorer" in source for source in dropped)        # an explorer
    assert all(c.cell_type == "markdown" or c.source.strip() for c in light.cells)
    # a cell that changes (or may change: reads) an object a kept cell reads stays; one that touches none goes
    cells = [nbformat.v4.new_code_cell(s) for s in ("import numpy as np\nw = np.zeros(3)", "w[0] = 1.0",
                                                     "shown = np.ones(2)\nprint(shown)", "total = w.sum()")]
    test = nbformat.v4.new_code_cell("assert total == 1.0")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "not_in_the_lesson", "points": 1}
    toy = nbformat.v4.new_notebook(cells=cells + [test])
    assert [c.source for c in without_demonstrations(toy, lesson).cells] == [
        "import numpy as np\nw = np.zeros(3)", "w[0] = 1.0", "total = w.sum()", "assert total == 1.0"]


# ---------------------------------------------------------------- the class report of the whole graded class

def _section(page, name):
    """The failures table of one exercise on a class report page ('' when it lists none)."""
    start = page.find(f"<h3><code>{html.escape(name)}</code>: ")
    if start < 0:
        return ""
    ends = [i for i in (page.find("<h3>", start + 1), page.find("<h2>", start + 1)) if i > 0]
    return page[start:min(ends)]


def test_the_class_report_groups_every_failure_in_the_gradebook_lists_every_flag_and_shows_no_hidden_test(
        graded_class):
    from autograder.class_report import build_report
    from autograder.job import FLAG_KINDS
    from autograder.gradebook import open_gradebook, pending
    from tools import site
    course = graded_class.course
    index = build_report(course, log=lambda *_: None).read_text()
    lessons = sorted({lesson for lesson, _ in graded_class.results})
    with open_gradebook(course) as gb:
        for lesson in lessons:
            assert f'href="{lesson}.html"' in index, f"the report's index does not link {lesson}"
            page = (course / "class_report" / f"{lesson}.html").read_text()
            source = load(course / "source" / lesson / f"{lesson}.ipynb")
            graded = [s for (l, s), r in graded_class.results.items() if l == lesson and r.status == "graded"]
            for test_id in graded_test_ids(source):
                points = next(c.metadata["nbgrader"]["points"] for c in source.cells if grade_id(c) == test_id)
                scores = {}
                for student in graded:
                    g = gb.find_grade(test_id, lesson, lesson, student)
                    if not pending(g):
                        scores[student] = g.score
                lost = sorted(s for s, score in scores.items() if score < points)
                section = _section(page, test_id)
                if not lost:
                    assert section == "", f"{lesson} {test_id}: no one lost a point, yet the report lists failures"
                    continue
                assert f"{len(lost)} of {len(scores)} did not get full marks" in section, (lesson, test_id, lost)
                named = re.findall(r'(?:<td>|, )([^<>,]+?) \(<a href="\.\./reports/', section)
                assert sorted(html.unescape(n) for n in named) == lost, (lesson, test_id, lost, named)
            flags = page[page.index("<h2>Flags for review"):page.index("<h2>Not graded")]
            for (l, student), r in graded_class.results.items():
                for flag in r.flags if l == lesson else []:  # under its kind's heading, with what the kind means
                    group = flags[flags.index(f'<h3 id="flag-{flag.kind}">'):]
                    group = group[:group.index("</ul>")]
                    assert html.escape(flag.text[:400]) in group and html.escape(FLAG_KINDS[flag.kind]) in group, \
                        f"{lesson} {student}: flag {flag[:80]!r} not on the report under {flag.kind}"
            hidden = [line for c in load(SOLUTIONS / f"{lesson}.ipynb").cells for line in cells.secret_lines(c.source)]
            assert hidden and site.leaked_lines(html.unescape(page), hidden) == [], f"{lesson}: a hidden test line"
