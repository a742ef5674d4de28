"""One graded class for the whole test run, built and graded once, read by every test that checks grades.

Every lesson gets three submissions: `complete` (the release copy filled with the solutions, with
the outputs and the explorers' saved widget state of a run of the solutions, as a student who ran it in
Jupyter hands it in), `unstarted` (the release copy) and `half` (the first half of the exercises).
Lesson 03 (AUTOGRADER_TEST_LESSONS chooses others) also gets the hostile class of
tests/autograder/hostile.py. That is the full run's class (`python -m pytest --full`); the default run's holds
every lesson's `complete` submission and the small hostile class hostile.FAST_CLASS (tests/full_run.py). Everything goes into one zip, the way an LMS hands it
over; `collect` places it, `grade --jobs 2` grades it once, `export` writes the CSVs and `feedback`
the pages of the hostile class. Readers: tests/autograder/test_class.py (the hostile class),
tests/lessons/test_grading.py (every lesson), tests/lessons/test_execute.py (the experiment's curves)
and tests/autograder/test_cluster.py (Dask against these local grades).
"""
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.collect import collect
from autograder.export import export
from autograder.feedback import generate_feedback
from autograder.run import grade
from autograder.sandbox.limits import Limits
from tests.autograder import hostile
from tests.nbtools import LESSONS, SOLUTIONS, fill_solutions, json_variable_cell, load, solution_ids

LIMITS = Limits(cell_timeout=15, notebook_timeout=90, memory_mb=4096)
PER_LESSON = ("complete", "unstarted", "half")
# lessons whose measured experiment leaves accuracy_by_length = {model: {length: accuracy}}; the complete
# submission prints it through one extra cell when graded (tests/lessons/test_execute.py checks the curves)
CURVES = {"01": ["no_attention"], "02": ["no_attention", "bahdanau"]}


def as_submitted(release_nb, solution_run):
    """The release copy filled with the solutions, carrying the outputs and the saved widget state of the run
    `solution_run` (an executed solution notebook): what a student who ran every cell in Jupyter hands in."""
    nb = fill_solutions(release_nb, solution_run)
    outputs = {c.get("id"): c.get("outputs", []) for c in solution_run.cells if c.cell_type == "code"}
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("id") in outputs:
            cell.outputs = outputs[cell.get("id")]
    if "widgets" in solution_run.metadata:
        nb.metadata["widgets"] = solution_run.metadata["widgets"]
    return nb


@dataclass
class GradedClass:
    course: Path
    students: dict      # {(lesson, student): (notebook or raw text, file name)}
    collected: object   # collect's report
    results: dict       # {(lesson, student): outcome.Outcome}
    grades_csv: Path
    summary: Path
    feedback: list      # feedback pages of the hostile students hostile.FEEDBACK_FOR

    @property
    def completed(self):
        """{lesson: its complete submission, as handed in}."""
        return {lesson: nb for (lesson, student), (nb, _) in self.students.items() if student == "complete"}

    def autograded(self, lesson, student):
        return load(self.course / "autograded" / student / lesson / f"{lesson}.ipynb")

    def of_lesson(self, lesson):
        """The hostile class of one lesson, as a dict (tests/autograder/test_class.py reads it)."""
        return dict(lesson=lesson, course=self.course, collected=self.collected,
                    students={s: v for (l, s), v in self.students.items() if l == lesson and s not in PER_LESSON},
                    results={s: r for (l, s), r in self.results.items() if l == lesson},
                    grades_csv=self.grades_csv, summary=self.summary,
                    feedback=[p for p in self.feedback if f"/{lesson}/" in str(p)])


def run_solutions():
    """{lesson: its solution notebook, run}: the website's full-mode runs when the cache holds a current one for
    every lesson (the README's site build, which .ci/run does first: what a student sees), else fast-mode runs
    made now, two at a time, through the same cache (tools/site.py; the fast-mode site reuses them)."""
    from tools import site
    full = {lesson: site.cached_run(lesson, fast=False) for lesson in LESSONS}
    if all(nb is not None for nb in full.values()):
        return full
    return site.run_lessons(LESSONS, fast=True, jobs=2, log=lambda *_: None)


def _students(course, solution_runs, full):
    students = {}
    for lesson in LESSONS:
        blank = load(course / "release" / lesson / f"{lesson}.ipynb")
        complete = as_submitted(blank, solution_runs[lesson])
        if lesson[:2] in CURVES:
            complete.cells.append(json_variable_cell("accuracy_by_length"))
        name = f"{lesson}.ipynb"
        students[lesson, "complete"] = (complete, name)
        if full:
            ids = solution_ids(blank)
            half = fill_solutions(blank, load(SOLUTIONS / f"{lesson}.ipynb"), ids[: (len(ids) + 1) // 2])
            students.update({(lesson, "unstarted"): (blank, name), (lesson, "half"): (half, name)})
    for lesson in hostile.TEST_LESSONS:
        chosen = hostile.build_class(course, lesson, None if full else hostile.FAST_CLASS)
        students.update({(lesson, s): v for s, v in chosen.items()})
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


def build(released_course, solution_runs, tmp, full=True):
    """Copy the released course into tmp, hand the class in, grade it, export it; a GradedClass.

    solution_runs: run_solutions()'s executed solutions (their outputs and widget state go into the
    `complete` submissions). full: the full run's class (else the default run's, in the module's docstring)."""
    import shutil
    course = tmp / "course"
    shutil.copytree(released_course, course)
    students = _students(course, solution_runs, full)
    _zip(students, hostile.TEST_LESSONS[0], tmp / "downloads.zip")
    collected = collect(tmp / "downloads.zip", course, LESSONS, log=lambda *_: None)
    results = {(r.lesson, r.student): r for r in grade(course, jobs=2, limits=LIMITS, log=print)}
    grades_csv, summary = export(course, tmp / "export", log=lambda *_: None)
    feedback = generate_feedback(course, hostile.TEST_LESSONS, [s for s in hostile.FEEDBACK_FOR if any(
        (lesson, s) in students for lesson in hostile.TEST_LESSONS)], log=lambda *_: None)
    return GradedClass(course, students, collected, results, grades_csv, summary, feedback)
