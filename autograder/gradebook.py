"""The course gradebook (nbgrader's, SQLite): the grading run is its one writer; export, the LMS files, collect's
roster and the class report read it (so they never import the run).

Workers write a private copy (a shard); `merge` copies what one worker wrote about its
submission into the course gradebook, `record_failure` enters a submission that could not be
graded, and `mark_flagged` sets nbgrader's own flag that formgrader shows. `final_score` is the one
rule for the score the exports write (export.py's CSV, lms.py's files).
"""
import warnings

from .course import gradebook_path, sqlite_url


def open_gradebook(course_root_or_url):
    """nbgrader's Gradebook on `<course_root>/gradebook.db` (or on a sqlite:/// URL)."""
    from nbgrader.api import Gradebook
    url = str(course_root_or_url)
    if not url.startswith("sqlite:"):
        url = sqlite_url(gradebook_path(url))
    return Gradebook(url)


def merge(shard_url, course_root, lesson, student):
    """Copy what nbgrader wrote about one submission from a shard gradebook into the course gradebook.

    Returns (score, max score, [grade ids left for manual grading]): a pending cell counts 0 in the score
    nbgrader computes, and the exports write the submission's score as pending until it is graded."""
    with warnings.catch_warnings():  # nbgrader's own SQLAlchemy autoflush notices
        warnings.simplefilter("ignore")
        with open_gradebook(shard_url) as shard, open_gradebook(course_root) as main:
            got = shard.find_submission(lesson, student)
            main.update_or_create_student(student)
            sub = main.update_or_create_submission(lesson, student, timestamp=got.timestamp)
            for nb in got.notebooks:
                target = main.find_submission_notebook(nb.name, lesson, student)
                target.late_submission_penalty = nb.late_submission_penalty
                for grade in nb.grades:
                    g = main.find_grade(grade.name, nb.name, lesson, student)
                    g.auto_score, g.needs_manual_grade = grade.auto_score, grade.needs_manual_grade
                for comment in nb.comments:
                    c = main.find_comment(comment.name, nb.name, lesson, student)
                    c.auto_comment = comment.auto_comment
            main.db.commit()
            return sub.score, sub.max_score, pending_cells(sub)


def pending(grade):
    """A test cell that waits for manual grading: no autograded score (the grader could not run it) and none
    given by hand yet. (nbgrader marks every new grade as needing one until autograding scores it.)"""
    return bool(grade.needs_manual_grade) and grade.auto_score is None and grade.manual_score is None


def pending_cells(submission):
    """The grade ids of a submission's test cells that wait for manual grading (a grader-side failure)."""
    return sorted(g.name for nb in submission.notebooks for g in nb.grades if pending(g))


def final_score(submission):
    """The score every export writes for a gradebook submission: nbgrader's score (formgrader's overrides
    included) less the late penalty, at least 0; None while a test cell waits for manual grading (pending: never
    a 0 the student did not earn)."""
    if pending_cells(submission):
        return None
    return max(0.0, submission.score - (submission.late_submission_penalty or 0.0))


def record_failure(course_root, lesson, student):
    """Enter a submission that could not be graded: every grade zero, nothing left pending."""
    with warnings.catch_warnings(), open_gradebook(course_root) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_student(student)
        sub = gb.update_or_create_submission(lesson, student)
        for nb in sub.notebooks:
            for grade in nb.grades:
                if grade.auto_score is None:
                    grade.auto_score = 0
        gb.db.commit()
        return sub.score, sub.max_score


def mark_flagged(course_root, lesson, student, flagged):
    """nbgrader's own flag on the submission's notebooks (formgrader shows it)."""
    with open_gradebook(course_root) as gb:
        for nb in gb.find_submission(lesson, student).notebooks:
            nb.flagged = bool(flagged)
        gb.db.commit()
