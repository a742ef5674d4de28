"""StripHiddenTests: the notebook written beside the kernel keeps no hidden test."""
from nbgrader.preprocessors import NbGraderPreprocessor

from .. import cells


class StripHiddenTests(NbGraderPreprocessor):
    """Remove the hidden tests from the notebook nbgrader writes beside the kernel (after OverwriteCells).

    nbgrader's autograde writes the sanitized notebook, test cells restored from the source,
    into the folder the kernel runs in. The tests run on the grader's side from the source
    notebook (verdicts.py), so the notebook on disk keeps only what the student was given: no
    file the kernel can open holds a hidden test. Only graded test cells are touched (their
    source is the instructor's); a student's own cell that merely contains the delimiters stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cells.is_test(cell):
            cell.source = cells.without_hidden_tests(cell.source)
        return cell, resources
