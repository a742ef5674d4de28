"""Running a submission: the test cells on the grader's side, the integrity flags, and the sandboxed kernel.

GradingExecute is nbgrader's Execute with every graded test cell run here, never in the kernel, through the
kernel boundary (autograder/kernel: a test's Verdict is decided in Boundary.run_test, mapped here to the cell's
outputs and events), and the integrity check after each; plain `nbgrader autograde` with
the course's nbgrader_config.py uses it. SandboxedExecute, used by `python -m autograder grade`,
adds the kernel launcher of sandbox/, a wall-clock budget per notebook, capped output, and a
dead kernel (os._exit, a crash, a memory limit) failing the remaining cells instead of the
whole notebook.
"""
import json
import os
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Integer, TraitError, validate

from .. import cells, flags, sandbox
from .. import kernel
from ..sandbox import clock
from .grades import WITHHELD
from ..sandbox.limits import Limits, refused
from ..course import lesson_notebook
from ..nbrun import UNREADABLE, SlicedWaits
from ..job import HANG, STARVED, event, record_kernel


def error_output(ename, evalue):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class GradingExecute(SlicedWaits, Execute):
    """nbgrader's Execute with the test cells run on the grader's side, and the integrity check.

    A graded test cell is never sent to the kernel: the boundary runs it here (kernel.Boundary.run_test), from
    the source notebook, against the student's objects. Before the first cell, a silent request records
    what the tests rely on; after each graded test cell the same request is compared with it.
    A change is a flag for review (`integrity: ...`), never a score: the verdicts do not depend
    on the kernel's state, so a patch earns nothing and costs nothing the honest work earned.
    """
    integrity_check = Bool(True, help="check what the tests rely on after every test cell").tag(config=True)
    timeout = Integer(Limits().cell_timeout, allow_none=True, help="seconds one cell may run, a test cell on the "
                      "grader's side included (set from autograder.sandbox.limits.Limits)").tag(config=True)
    check_timeout = Integer(Limits().integrity_timeout, allow_none=True, help="seconds to wait for the integrity "
                            "check's answer (set from autograder.sandbox.limits.Limits)").tag(config=True)
    # a graded kernel's last state is never read: killed at once (the student's atexit hooks never run),
    # not asked to exit (with torch loaded, a graceful exit took 2.3 s of every notebook)
    shutdown_kernel = Enum(["graceful", "immediate"], "immediate").tag(config=True)

    @validate("timeout", "check_timeout")
    def _a_limit(self, proposal):
        """nbclient reads a timeout of None or -1 as no limit: a grading always has one (sandbox/limits.py)."""
        why = refused(proposal["value"])
        if why:
            raise TraitError(f"{type(self).__name__}.{proposal['trait'].name} {why}")
        return proposal["value"]

    def preprocess(self, nb, resources=None, km=None):
        self._source = lesson_notebook(self.config, resources, "source")
        if self._source is None:
            raise ValueError("the lesson's source notebook was not found: its tests cannot run")
        # where the student's code moves tensor data out of torch's sight: named beside a memory test that only the
        # kernel's own count measured (Session.moves)
        release = lesson_notebook(self.config, resources, "release")
        self._moves = flags.data_moves(flags.student_code(nb, self._source, release, numbered=True))
        self._boundary = None  # opened at the first code cell, the kernel started (open_boundary)
        self._integrity_off = not self.integrity_check
        self._reported, self._withheld = set(), []
        self._clock, self._starved, self._cgroup = None, False, None
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            if self._boundary is not None:
                self._boundary.close()
        resources.setdefault("autograder", {})[WITHHELD] = list(self._withheld)  # SaveGrades leaves them ungraded
        return nb, resources

    def start_new_kernel_client(self):
        super().start_new_kernel_client()
        # read once the kernel answers and before any cell runs: the processes in its cgroup now are the sandbox's
        # and the kernel's own
        launcher = getattr(getattr(self.km, "provisioner", None), "pid", None)
        self._cgroup = sandbox.KernelCgroup.of(str(launcher)) if launcher and os.geteuid() == 0 else None

    def _run_test_here(self, cell, index):
        """A test cell's verdict (Boundary.run_test, decided there), as the cell's outputs and the job's events."""
        verdict = self._boundary.run_test(cells.grade_id(cell), self._get_timeout(cell), self._busy)
        if verdict.timeout:
            event("timeout", f"cell {index} timed out: the student's code ran past the cell's limit during its test "
                  f"({verdict.timeout})")
        if verdict.outcome == kernel.WITHHELD:  # left for manual grading (SaveGrades)
            self._withheld.append(verdict.grade_id)
            event("grader", f"{verdict.why}: left for manual grading (pending in formgrader and the exports), review "
                  "it", verdict.grade_id)
        for note in verdict.notes:
            event("integrity", f"{note} (test cell {verdict.grade_id})", verdict.grade_id)
        cell.outputs = kernel.outputs_for(verdict.stdout, verdict.error)
        cell.execution_count = None
        return cell

    def _busy(self, where, timed_out):
        """(busy, timeout) for Boundary.run_test: whether the machine was too busy to run the kernel (after this
        timeout or an earlier one), and the clock's words of a timeout just now that was the student's code."""
        starved, why = self._starved_timeout(where) if timed_out else (False, "")
        return self._starved, why if timed_out and not starved else ""

    def _kernel_clock(self):
        return clock.read(getattr(getattr(getattr(self, "km", None), "provisioner", None), "pid", None))

    def _starved_timeout(self, where):
        """(starved?, why) of a timeout just now: whether it came while the kernel was starved of CPU
        (sandbox/clock.py); if so, a STARVED event (the parent grades the submission again, once, after the others)
        and every later failing test cell is withheld for manual grading, not charged."""
        starved, why = clock.starved(self._clock, self._kernel_clock())
        if starved:
            self._starved = True
            event(STARVED, f"{where} timed out while the machine was too busy to run the kernel ({why}): not charged")
        return starved, why

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._boundary is None:
            self._boundary = kernel.open_boundary(self.kc, self.km, self._source, cgroup=self._cgroup, moves=self._moves,
                                                  check_seconds=self.check_timeout, baseline_seconds=self.timeout)
        if cell.cell_type == "code" and not self._integrity_off and not self._boundary.checking():
            try:
                self._boundary.integrity("baseline")
            except Exception as e:  # noqa: BLE001: the grader's problem, never the student's score
                self._integrity_off = True
                event("integrity", f"not checked: the grader's check could not start ({e})")
        if cell.cell_type == "code":
            self._clock = self._kernel_clock()  # what the kernel has run and waited for, as this cell starts
        if cells.is_test(cell) and self._boundary.grades(cells.grade_id(cell)):
            cell = self._run_test_here(cell, index)
        else:
            cell, resources = super().preprocess_cell(cell, resources, index)
        if cells.is_test(cell) and not self._integrity_off and self._boundary.checking():
            for change in self._boundary.check():
                if change not in self._reported:
                    self._reported.add(change)
                    event("integrity", f"{change} (first seen after test cell {cells.grade_id(cell)})",
                          cells.grade_id(cell))
        return cell, resources


class SandboxedExecute(GradingExecute):
    """GradingExecute with a sandboxed kernel, a notebook budget, capped output and dead-kernel recovery."""
    notebook_timeout = Integer(Limits().notebook_timeout, help="seconds of execution for the whole notebook (set "
                               "from autograder.sandbox.limits.Limits)").tag(config=True)
    max_output_bytes = Integer(Limits().output_kb * 1024, help="output kept per cell, the rest dropped (set from "
                               "autograder.sandbox.limits.Limits)").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", sandbox.SandboxKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_timeout
        self.timeout_func = self.cell_limit  # nbclient's hook: each cell's limit, the trait never rewritten
        self._dead = None
        self._timed_out = False
        self._output_bytes = {}
        return super().preprocess(nb, resources, km)

    def start_new_kernel(self, **kwargs):
        super().start_new_kernel(**kwargs)
        record_kernel(self.km)

    def cell_limit(self, cell):
        """A cell's limit (nbclient's timeout_func): the cell timeout cut to what is left of the notebook's budget,
        at least 1 s; remembered for the timeout event's words."""
        self._given = max(1, int(min(self.timeout, self._deadline - time.monotonic())))
        return self._given

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        remaining = self._deadline - time.monotonic()
        if not self._dead and remaining <= 0:
            self._dead = f"the notebook ran past its {self.notebook_timeout} s budget before cell {index}"
            event("runtime", self._dead)
        if self._dead:
            cell.outputs = [error_output("CellNotRun", f"not run: {self._dead}")]
            event("timeout", f"cell {index} not run: {self._dead}")
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError as e:
            self._dead = (f"{UNREADABLE} from cell {index} on" if UNREADABLE in str(e) else
                          f"the kernel died in cell {index} (os._exit, a crash, or a resource limit)")
            cell.outputs.append(error_output("DeadKernelError", self._dead))
            event("runtime", self._dead)
            return cell, resources
        except CellTimeoutError as e:  # no reply, or output still streaming, after the interrupt
            cell.outputs.append(error_output("CellTimeoutError", str(e).splitlines()[0]))
            starved, why = self._starved_timeout(f"cell {index}")
            if not starved:
                event("timeout", f"cell {index} timed out: {str(e).splitlines()[0]} ({why})")
            self._note_timeout(cell, index)
            return cell, resources

    def _note_timeout(self, cell, index):
        if "iopub.execute_input" not in cell.metadata.get("execution", {}) and not self._timed_out:
            # the kernel never started the cell, right after one that ended: a lost request
            # (ipykernel issue 1554), not slow code (after a timeout, the student's code may hold it)
            event(HANG, f"cell {index} never started: the kernel sat idle and no reply came")
        self._timed_out = True

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        outputs = kwargs["cell"].get("outputs", [])
        if any(o.output_type == "error" and o.ename == "CellTimeoutError" for o in outputs):
            starved, why = self._starved_timeout(f"cell {kwargs['cell_index']}")
            if not starved:
                event("timeout", f"cell {kwargs['cell_index']} timed out after {self._given} s ({why})")
            self._note_timeout(kwargs["cell"], kwargs["cell_index"])

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] in ("stream", "display_data", "execute_result", "update_display_data"):
            size = len(json.dumps(msg["content"]))
            used = self._output_bytes.get(cell_index, 0)
            self._output_bytes[cell_index] = used + size
            if used + size > self.max_output_bytes:
                if used <= self.max_output_bytes:
                    event("output", f"cell {cell_index} output truncated at {self.max_output_bytes} bytes")
                    outs.append(new_output("stream", name="stdout",
                                           text=f"\n... output truncated at {self.max_output_bytes} bytes ...\n"))
                return None
        return super().output(outs, msg, display_id, cell_index)
