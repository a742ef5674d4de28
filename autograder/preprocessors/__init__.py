"""The course's nbgrader preprocessors, one job each, named in nbgrader_config.py.

Sanitizing (before the kernel starts): RestoreCellMetadata, DeduplicateIds, then nbgrader's
OverwriteCells, then StripHiddenTests. Autograding: GradingExecute (SandboxedExecute under
`python -m autograder grade`), then TestCellOutcome, then SaveGrades (nbgrader's SaveAutoGrades, leaving a test
cell the grader could not run for manual grading).
Feedback: HideHiddenTests (shown.py), first in GenerateFeedback.preprocessors.
"""
from .execute import GradingExecute, SandboxedExecute
from .grades import SaveGrades
from .hidden import StripHiddenTests
from .metadata import DeduplicateIds, RestoreCellMetadata
from .outcome import TestCellOutcome
from .shown import HideHiddenTests

__all__ = ["GradingExecute", "SandboxedExecute", "StripHiddenTests", "DeduplicateIds", "RestoreCellMetadata",
           "TestCellOutcome", "SaveGrades", "HideHiddenTests"]
