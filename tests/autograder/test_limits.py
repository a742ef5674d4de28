"""sandbox/limits.py: every limit of a grading has a positive value, refused with a clear message otherwise, and a
cell's limit reaches nbclient through its timeout_func hook (the trait is never rewritten)."""
import dataclasses

import pytest
from traitlets import TraitError
from traitlets.config import Config

from autograder.__main__ import build_parser
from autograder.preprocessors import GradingExecute, SandboxedExecute
from autograder.sandbox.limits import Limits
from tests.autograder import tiny


@pytest.mark.parametrize("value", [-1, None, 0, 2.5, "120"])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused_with_its_option(value):
    """nbclient reads a cell timeout of -1 or None as no limit: as a grading's limit that was a 1 s limit on every
    cell (-1) or a TypeError in every notebook (None)."""
    with pytest.raises(ValueError, match=r"Limits\.cell_timeout \(--cell-timeout\) must be a whole number of seconds "
                                         rf"above 0, not {value!r}"):
        Limits(cell_timeout=value)


@pytest.mark.parametrize("field", dataclasses.fields(Limits), ids=lambda f: f.name)
def test_every_limit_refuses_minus_one(field):
    with pytest.raises(ValueError, match=f"Limits.{field.name} "):
        Limits(**{field.name: -1})


@pytest.mark.parametrize("value", ["-1", "0", "none", "1.5"])
def test_the_command_line_refuses_a_cell_timeout_that_is_no_limit(value, capsys):
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["grade", "--cell-timeout", value])
    assert stopped.value.code == 2
    assert "argument --cell-timeout: must be a whole number of seconds above 0" in capsys.readouterr().err


@pytest.mark.parametrize("value", [-1, None, 0])
@pytest.mark.parametrize("trait", ["timeout", "check_timeout"])
def test_the_execute_traits_refuse_no_limit_by_name(trait, value):
    """Plain nbgrader reads nbgrader_config.py's Execute.timeout: a hand-edited -1 or None is refused as the grading
    starts, naming the trait, not read as a 1 s limit or a TypeError in every cell."""
    config = Config({"Execute" if trait == "timeout" else "GradingExecute": {trait: value}})
    with pytest.raises(TraitError, match=f"SandboxedExecute.{trait} must be a whole number of seconds above 0"):
        SandboxedExecute(config=config)


@pytest.mark.parametrize("budget, limit", [(5, {4, 5}), (500, {120})])
def test_a_cells_limit_is_the_cell_timeout_cut_to_the_notebooks_budget(monkeypatch, budget, limit):
    """SandboxedExecute hands nbclient each cell's limit through timeout_func: the cell timeout, or what is left of
    the notebook's budget when that is less; Execute.timeout itself keeps its value."""
    seen = {}

    def preprocess(self, nb, resources=None, km=None):
        seen.update(limit=self._get_timeout(nb.cells[0]), timeout=self.timeout)
        return nb, resources
    monkeypatch.setattr(GradingExecute, "preprocess", preprocess)
    SandboxedExecute(notebook_timeout=budget).preprocess(tiny.released(), {})
    assert seen["limit"] in limit and seen["timeout"] == Limits().cell_timeout == 120, seen
