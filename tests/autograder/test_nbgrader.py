"""Plain `nbgrader autograde` with the course's nbgrader_config.py: full marks, zero, something in between.

The same verdict mechanism as `python -m autograder grade` without its sandbox (README); shown on the
small lesson of tiny_course (every real lesson is graded the sandboxed way in tests/lessons/test_grading.py,
through the same GradingExecute).
"""
import json
import shutil

from autograder.course import nbgrader_api
from tests.autograder import tiny
from tests.nbtools import fill_solutions, is_solution, load, solution_ids, submit


def autograde_scores(course, lesson, students):
    from nbgrader.api import Gradebook
    api = nbgrader_api(course)
    for student in students:
        result = api.autograde(lesson, student, force=True, create=True)
        assert result["success"], f"nbgrader autograde failed for {student}: {result['error']}\n{result['log']}"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {s: (gradebook.find_submission(lesson, s).score, gradebook.find_submission(lesson, s).max_score)
                for s in students}


def test_autograde_full_marks_zero_and_partial(tiny_course, tmp_path):
    lesson = tiny.LESSON
    course = tmp_path / "course"
    shutil.copytree(tiny_course, course)
    blank = load(course / "release" / lesson / f"{lesson}.ipynb")
    solution = tiny.lesson()
    ids = solution_ids(solution)
    submit(course, lesson, "complete", fill_solutions(blank, solution))
    submit(course, lesson, "blank", blank)
    submit(course, lesson, "half", fill_solutions(blank, solution, ids[: (len(ids) + 1) // 2]))

    scores = autograde_scores(course, lesson, ["complete", "blank", "half"])

    score, max_score = scores["complete"]
    assert max_score > 0 and score == max_score, f"{lesson}: a complete submission scored {score}/{max_score}"
    assert scores["blank"][0] == 0, f"{lesson}: the blank copy scored {scores['blank']}"
    assert 0 < scores["half"][0] < max_score, f"{lesson}: a half-finished copy scored {scores['half']}"
    # the notebook nbgrader wrote beside the kernel (the graded copy) holds no hidden test of the lesson
    from autograder.cells import secret_lines, without_hidden_tests
    public = {line.strip() for c in solution.cells for line in without_hidden_tests(c.source).splitlines()}
    hidden = [line for c in solution.cells for line in secret_lines(c.source) if line not in public]
    graded = load(course / "autograded" / "complete" / lesson / f"{lesson}.ipynb")
    texts = [c.source for c in graded.cells] + [json.dumps(o) for c in graded.cells for o in c.get("outputs", [])]
    lines = {line.strip() for text in texts for line in text.replace("\\n", "\n").splitlines()}
    assert hidden and not [line for line in hidden if line in lines]


def test_a_graded_kernel_is_ended_at_once_and_the_students_exit_hooks_never_run(tiny_course, tmp_path):
    # its last state is never read: killed, not asked to exit (a graceful exit cost 2.3 s of every notebook)
    lesson, course, marker = tiny.LESSON, tmp_path / "course", tmp_path / "exit-hook-ran"
    shutil.copytree(tiny_course, course)
    blank = load(course / "release" / lesson / f"{lesson}.ipynb")
    nb = fill_solutions(blank, tiny.lesson())
    answer = next(c for c in nb.cells if is_solution(c))
    answer.source += f"\nimport atexit\natexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
    submit(course, lesson, "hooked", nb)

    score, max_score = autograde_scores(course, lesson, ["hooked"])["hooked"]

    assert score == max_score > 0 and not marker.exists()
