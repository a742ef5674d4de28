"""The kernel boundary as one object: a grading's kernel opened for the lesson's tests, and each test's verdict.

`open_boundary` assembles what grading one notebook needs from the grader's side of a kernel: the transport
(transport.py), a Session with its lending (session.py), the lesson's test runner (verdicts.py), the integrity check
(integrity.py) and the Triton meter (meter.py). `Boundary.run_test(grade_id)` runs one graded test cell and returns
its `Verdict`, decided there and nowhere else; preprocessors/execute.py maps it to the cell's outputs and events.
"""
import dataclasses
import time

from jupyter_core.utils import run_sync
from nbclient.exceptions import DeadKernelError

from . import integrity, meter
from .session import Session
from .transport import kernel_transport, silent_request
from .verdicts import LessonTests
from .wire import GraderSideError

PASSED, FAILED, WITHHELD, TIMED_OUT = "passed", "failed", "withheld", "timed_out"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What one graded test cell found.

    outcome: PASSED (no error), FAILED (the student's error), TIMED_OUT (the student's code ran past the cell's
    limit), WITHHELD (the grader could not judge it: left for manual grading, `why` says so). error: what the cell
    shows (None when passed); notes: what a reviewer should see about the answers (integrity events)."""
    grade_id: str
    outcome: str
    stdout: str
    error: BaseException | None
    notes: tuple = ()
    why: str = ""  # WITHHELD: why the grader could not judge it
    timeout: str = ""  # the clock's words of a timeout charged to the student's code (an event), else ""


class Boundary:
    """A notebook's kernel as the lesson's tests see it: `run_test`, the integrity check, `close`."""

    def __init__(self, kc, km, source_nb, *, cgroup=None, moves=(), check_seconds=30, baseline_seconds=120):
        self.kc, self.km = kc, km
        self.watch = integrity.Watch(source_nb)
        self.check_seconds, self.baseline_seconds = check_seconds, baseline_seconds
        self.meter = meter.Meter()
        self.deadline = None  # the monotonic time by which the running test cell must end
        transport = kernel_transport(
            kc, run_sync(kc.shell_channel.get_msg), deadline=lambda: self.deadline,
            on_timeout=run_sync(km.interrupt_kernel), is_alive=run_sync(km.is_alive),
            get_stdin_msg=run_sync(kc.stdin_channel.get_msg))
        self.session = Session(transport, meter=self.meter, cgroup=cgroup, deadline=lambda: self.deadline)
        self.session.moves = tuple(moves)
        self.tests = LessonTests(source_nb)
        self.runner = self.tests.runner(self.session)

    def run_test(self, grade_id, seconds, starved):
        """Test cell `grade_id` run here against the kernel within `seconds`: its Verdict, decided here.

        starved(where, timed_out) -> (busy, timeout): busy, whether a failure now is not the student's (the machine
        was too busy to run the kernel, judged by its clock after a timeout just now or an earlier one); timeout,
        the clock's words of a timeout just now that was the student's code ("" if none)."""
        self.deadline = time.monotonic() + seconds
        try:
            stdout, error = self.runner.run(grade_id)
        except GraderSideError as e:
            return self._withheld(grade_id, f"the grader could not run test cell {grade_id} ({e})")
        notes = tuple(self.session.take_notes())
        if error is None:
            return Verdict(grade_id, PASSED, stdout, None, notes)
        timed_out = isinstance(error, TimeoutError)
        busy, timeout = starved(f"test cell {grade_id}", timed_out)
        if busy:
            return self._withheld(grade_id, f"test cell {grade_id} failed after a cell timed out while the machine "
                                            "was too busy to run the kernel", timeout, notes)
        return Verdict(grade_id, TIMED_OUT if timed_out else FAILED, stdout, error, notes, timeout=timeout)

    def _withheld(self, grade_id, why, timeout="", notes=None):
        error = GraderSideError(f"the grader could not judge this test ({why[:300]}): it is left for your "
                                "instructor to grade by hand")
        notes = tuple(self.session.take_notes()) if notes is None else notes
        return Verdict(grade_id, WITHHELD, "", error, notes, why, timeout)

    def integrity(self, mode):
        """The integrity check's answer (integrity.py): mode "baseline" records it, "check" compares; returns the
        changes since the baseline (sentences), or raises ValueError when the kernel gave no genuine answer."""
        nonce, expression = self.watch.request(mode)
        # the baseline imports torch, numpy and course_utils (the notebook's first cells would): a cell's time
        seconds = max(self.check_seconds, self.baseline_seconds) if mode == "baseline" else self.check_seconds
        end = time.monotonic() + seconds
        try:
            reply = silent_request(self.kc, run_sync(self.kc.shell_channel.get_msg), "", {"check": expression},
                                   deadline=lambda: end, is_alive=run_sync(self.km.is_alive))
        except TimeoutError:
            raise ValueError(f"no answer within {seconds} s") from None
        answer = self.watch.parse(nonce, reply)
        if mode == "baseline":
            self.watch.baseline = answer
            return []
        return self.watch.changes(answer)

    def grades(self, grade_id):
        """Whether `grade_id` is one of the lesson's graded test cells (run here, never in the kernel)."""
        return grade_id in self.tests.tests

    def checking(self):
        """Whether the integrity check has its baseline (each test cell is then compared with it)."""
        return self.watch.baseline is not None

    def check(self):
        """The integrity check after a test cell: the changes since the baseline, as sentences for review."""
        try:
            return self.integrity("check")
        except DeadKernelError:  # a crash, reported as one (runtime): nothing left to check
            return []
        except Exception as e:  # noqa: BLE001: a kernel that fakes or withholds the answer
            return [f"the integrity check got no genuine answer ({e})"]

    def close(self):
        self.meter.close()


def open_boundary(kc, km, source_nb, *, cgroup=None, moves=(), check_seconds=30, baseline_seconds=120):
    """The boundary of a started kernel (kc, km: its client and manager) for the tests of the lesson's source
    notebook; cgroup: the kernel's sandbox.KernelCgroup or None; moves: flags.data_moves of the submission."""
    return Boundary(kc, km, source_nb, cgroup=cgroup, moves=moves, check_seconds=check_seconds,
                    baseline_seconds=baseline_seconds)
