"""TestCellOutcome: a test cell passes or fails on one fact, whether it raised an error."""
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from .. import cells


class TestCellOutcome(NbGraderPreprocessor):
    """Reduce every graded test cell's outputs to its outcome: nothing when it passed, its error when not.

    nbgrader scores a test cell from its outputs: an error or any stderr text scores zero, and a
    display result (execute_result) is read as partial credit, full marks when it is not a
    number. The course's rule is pass/fail: a test cell earns its points if and only if it
    raised no error. After this preprocessor nbgrader's own SaveAutoGrades applies exactly that
    rule. What was removed (what the test printed) is kept, bounded, in the cell's metadata
    (autograder.removed_outputs) for the instructor.
    """
    __test__ = False  # not a pytest test class, whatever its name
    max_message = Integer(1000, help="characters of an error message kept").tag(config=True)
    max_removed = Integer(2000, help="characters of removed output kept in the metadata").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not cells.is_test(cell):
            return cell, resources
        errors = [o for o in cell.outputs if o.output_type == "error"]
        removed = [o for o in cell.outputs if o.output_type != "error"]
        for o in errors:
            o.ename = bounded(str(o.get("ename", "")), 100)
            o.evalue = bounded(str(o.get("evalue", "")), self.max_message)
        cell.outputs = errors[:1]
        if removed:
            text = "".join(o.get("text", "") if o.output_type == "stream" else
                           f"[{o.output_type}: {', '.join(o.get('data', {}))}] "
                           f"{o.get('data', {}).get('text/plain', '')}\n" for o in removed)
            cell.metadata.setdefault("autograder", {})["removed_outputs"] = bounded(text, self.max_removed)
        return cell, resources


def bounded(text, limit):
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
