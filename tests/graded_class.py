"""One graded class for the whole test run, built and graded once, read by every test that checks grades.

Every lesson gets three submissions: `complete` (the solutions, run in Jupyter as a student runs them,
outputs and the explorers' saved widget state included), `unstarted` (the release copy) and `half`
(the first half of the exercises). Lesson 03 (AUTOGRADER_TEST_LESSONS chooses others) also gets the
hostile class of tests/autograder/hostile.py. Everything goes into one zip, the way an LMS hands it
over; `collect` places it, `grade --jobs 2` grades it once, `export` writes the CSVs and `feedback`
the pages of the hostile class. Readers: tests/autograder/test_class.py (the hostile class),
tests/lessons/test_grading.py (every lesson), tests/lessons/test_execute.py (the complete runs) and
tests/autograder/test_cluster.py (Dask against these local grades).
"""
import multiprocessing
import os
import zipfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.collect import collect
from autograder.feedback import export, generate_feedback
from autograder.grading import Limits, grade
from tests.autograder import hostile
from tests.nbtools import LESSONS, REPO, SOLUTIONS, fill_solutions, json_variable_cell, load, solution_ids

LIMITS = Limits(cell_timeout=15, notebook_timeout=90, memory_mb=4096)
PER_LESSON = ("complete", "unstarted", "half")
# lessons whose measured experiment leaves accuracy_by_length = {model: {length: accuracy}}; the complete
# run reads it back through one extra cell (tests/lessons/test_execute.py checks the curves)
CURVES = {"01": ["no_attention"], "02": ["no_attention", "bahdanau"]}


def run_as_student(release_path, lesson):
    """The release copy filled with the solutions and run in fast mode as Jupyter runs it; notebook JSON text.

    The widget state Jupyter saves with a notebook is kept, as in a real hand-in. Runs in a worker process.
    """
    from autograder.nbrun import NotebookClient
    os.environ["COURSE_FAST"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"  # two notebooks at a time on the cores: one thread each
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    nb = fill_solutions(load(release_path), load(SOLUTIONS / f"{lesson}.ipynb"))
    if lesson[:2] in CURVES:
        nb.cells.append(json_variable_cell("accuracy_by_length"))
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True, store_widget_state=True,
                   resources={"metadata": {"path": str(REPO)}}).execute()
    return nbformat.writes(nb)


@dataclass
class GradedClass:
    course: Path
    students: dict      # {(lesson, student): (notebook or raw text, file name)}
    completed: dict     # {lesson: the complete submission as run in Jupyter}
    collected: object   # collect's report
    results: dict       # {(lesson, student): grading.Result}
    grades_csv: Path
    summary: Path
    feedback: list      # feedback pages of the hostile students hostile.FEEDBACK_FOR

    def autograded(self, lesson, student):
        return load(self.course / "autograded" / student / lesson / f"{lesson}.ipynb")

    def of_lesson(self, lesson):
        """The hostile class of one lesson, as a dict (tests/autograder/test_class.py reads it)."""
        return dict(lesson=lesson, course=self.course, collected=self.collected,
                    students={s: v for (l, s), v in self.students.items() if l == lesson and s not in PER_LESSON},
                    results={s: r for (l, s), r in self.results.items() if l == lesson},
                    grades_csv=self.grades_csv, summary=self.summary,
                    feedback=[p for p in self.feedback if f"/{lesson}/" in str(p)])


def run_everyone(released_course):
    """{lesson: complete submission as run in Jupyter}, two notebooks at a time (fresh processes: no forked
    zmq state)."""
    course = released_course
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        texts = {lesson: pool.submit(run_as_student, course / "release" / lesson / f"{lesson}.ipynb", lesson)
                 for lesson in LESSONS}
        return {lesson: nbformat.reads(job.result(), as_version=4) for lesson, job in texts.items()}


def _students(course, completed):
    students = {}
    for lesson in LESSONS:
        blank = load(course / "release" / lesson / f"{lesson}.ipynb")
        ids = solution_ids(blank)
        half = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"), ids[: (len(ids) + 1) // 2])
        name = f"{lesson}.ipynb"
        students.update({(lesson, "complete"): (completed[lesson], name), (lesson, "unstarted"): (blank, name),
                         (lesson, "half"): (half, name)})
    for lesson in hostile.TEST_LESSONS:
        students.update({(lesson, s): v for s, v in hostile.build_class(course, lesson).items()})
    return students


def _zip(students, lesson, path):
    """The class as an LMS download, with a stray file, a link into solutions/ and a zip bomb."""
    with zipfile.ZipFile(path, "w") as z:
        for (_, student), (nb, filename) in students.items():
            z.writestr(f"{student}/{filename}", nb if isinstance(nb, str) else nbformat.writes(nb))
        z.writestr("perfect/notes.txt", "not a notebook")
        link = zipfile.ZipInfo(f"linked/{lesson}.ipynb")
        link.external_attr = (0o120777 << 16)
        z.writestr(link, str(SOLUTIONS / f"{lesson}.ipynb"))
        z.writestr("bomb/zeros.zip", hostile.zip_of_zeros())


def build(released_course, completed, tmp):
    """Copy the released course into tmp, hand the class in, grade it, export it; a GradedClass.

    completed: run_everyone's complete submissions."""
    import shutil
    course = tmp / "course"
    shutil.copytree(released_course, course)
    students = _students(course, completed)
    _zip(students, hostile.TEST_LESSONS[0], tmp / "downloads.zip")
    collected = collect(tmp / "downloads.zip", course, LESSONS, log=lambda *_: None)
    results = {(r.lesson, r.student): r for r in grade(course, jobs=2, limits=LIMITS, log=print)}
    grades_csv, summary = export(course, tmp / "export", log=lambda *_: None)
    feedback = generate_feedback(course, hostile.TEST_LESSONS, hostile.FEEDBACK_FOR, log=lambda *_: None)
    return GradedClass(course, students, completed, collected, results, grades_csv, summary, feedback)
