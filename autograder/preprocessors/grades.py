"""SaveGrades: nbgrader's SaveAutoGrades, except that a test cell the grader could not run is left ungraded."""
from nbgrader.preprocessors import SaveAutoGrades

WITHHELD = "withheld"  # resources["autograder"][WITHHELD]: grade ids of test cells ended by a grader-side failure


class SaveGrades(SaveAutoGrades):
    """Save the autograded scores, leaving the test cells GradingExecute withheld for manual grading.

    A test cell that a grader-side failure ended (verdicts.GraderSideError: no answer from the kernel, a
    request the grader could not send) says nothing about the student's answer. nbgrader would score its
    error output 0; here its auto score stays empty and nbgrader's needs_manual_grade is set, so formgrader
    lists it under "needs manual grade", `export` writes the submission's score as pending, and the
    instructor's score, once typed in formgrader, is the one that counts.
    """

    def preprocess(self, nb, resources):
        self._withheld = set(resources.get("autograder", {}).get(WITHHELD, ()))
        return super().preprocess(nb, resources)

    def _add_score(self, cell, resources):
        super()._add_score(cell, resources)
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if grade_id in self._withheld:
            grade = self.gradebook.find_grade(grade_id, self.notebook_id, self.assignment_id, self.student_id)
            grade.auto_score, grade.needs_manual_grade = None, True
            self.gradebook.db.commit()
