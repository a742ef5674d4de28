"""The course's nbgrader preprocessors, one job each, named in nbgrader_config.py.

Sanitizing (before the kernel starts): RestoreCellMetadata, DeduplicateIds, then nbgrader's
OverwriteCells, then StripHiddenTests. Autograding: GradingExecute (SandboxedExecute under
`python -m autograder grade`), then TestCellOutcome, then SaveGrades (nbgrader's SaveAutoGrades, leaving a test
cell the grader could not run for manual grading).
Feedback: HideHiddenTests, first in GenerateFeedback.preprocessors.
A class lives in the module named after it, as nbgrader names its own (hidehiddentests.py holds HideHiddenTests),
but for the pairs: execute.py (GradingExecute and SandboxedExecute), metadata.py (RestoreCellMetadata and
DeduplicateIds), and grades.py (SaveGrades, which execute.py tells what it withheld).
"""
from .execute import GradingExecute, SandboxedExecute
from .grades import SaveGrades
from .hidehiddentests import HideHiddenTests
from .metadata import DeduplicateIds, RestoreCellMetadata
from .striphiddentests import StripHiddenTests
from .testcelloutcome import TestCellOutcome

__all__ = ["GradingExecute", "SandboxedExecute", "StripHiddenTests", "DeduplicateIds", "RestoreCellMetadata",
           "TestCellOutcome", "SaveGrades", "HideHiddenTests"]
