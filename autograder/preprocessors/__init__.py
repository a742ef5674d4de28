"""The course's nbgrader preprocessors, one job each, named in nbgrader_config.py.

Sanitizing (before the kernel starts): RestoreCellMetadata, DeduplicateIds, then nbgrader's
OverwriteCells, then StripHiddenTests. Autograding: GradingExecute (SandboxedExecute under
`python -m autograder grade`), then TestCellOutcome before nbgrader's SaveAutoGrades.
Feedback: HideHiddenTests (shown.py), first in GenerateFeedback.preprocessors.
"""
from .execute import GradingExecute, SandboxedExecute
from .hidden import StripHiddenTests
from .metadata import DeduplicateIds, RestoreCellMetadata
from .outcome import TestCellOutcome
from .shown import HideHiddenTests

__all__ = ["GradingExecute", "SandboxedExecute", "StripHiddenTests", "DeduplicateIds", "RestoreCellMetadata",
           "TestCellOutcome", "HideHiddenTests"]
