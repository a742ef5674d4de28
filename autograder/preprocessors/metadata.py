"""A submission's nbgrader metadata: restored as released, and copies of graded cells made ordinary."""
from nbgrader.preprocessors import DeduplicateIds as NbgraderDeduplicateIds
from nbgrader.preprocessors import NbGraderPreprocessor

from ..course import lesson_notebook
from ..flags import deleted_tests
from ..job import event
from ..restore import restore


class RestoreCellMetadata(NbGraderPreprocessor):
    """restore.py before nbgrader's OverwriteCells: every cell gets its released nbgrader metadata back. What it
    changed, and every released test cell the graded copy still lacks, goes to the parent as events (job.py)."""

    def preprocess(self, nb, resources):
        released = lesson_notebook(self.config, resources, "release") or \
            lesson_notebook(self.config, resources, "source")
        if released is None:
            return nb, resources
        for found in restore(nb, released) + deleted_tests(nb, released):
            self.log.warning("%s", found)
            event(found.kind, found.text, found.cell)
        return nb, resources


class DeduplicateIds(NbgraderDeduplicateIds):
    """nbgrader's DeduplicateIds, fixed: the copies of a cell lose their nbgrader metadata entirely.

    A cell copied and pasted in Jupyter keeps its metadata, grade_id included. nbgrader keeps
    the first and sets the copy's metadata to {}, which its own schema check then rejects
    ("Outdated schema version: 0") and the whole submission fails. Removing the key instead
    makes the copy an ordinary student cell: it still runs, it earns nothing.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.metadata.get("nbgrader", None) == {}:
            del cell.metadata["nbgrader"]
        return cell, resources
