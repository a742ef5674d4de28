"""What is active while a test runs: every open block of course_utils, in one place.

A test opens blocks (`with cu.forbid(...)`, `with TensorMemory() as m`, `with count_work() as w`, ...). Those
the grader must carry to the student's kernel with each call, and those a measurement adds to, are recorded
here, innermost last, and nowhere else: `AMBIENT` holds them; `active()` is what a call made now runs under,
the one thing the grader's session reads before each request (autograder/kernel/session.py).
"""
import dataclasses


@dataclasses.dataclass
class Ambient:
    """The open blocks of this process, each list innermost last."""
    forbidden: list = dataclasses.field(default_factory=list)         # each `forbid` block's names (refusals.py)
    launcher_only: list = dataclasses.field(default_factory=list)     # each `launcher_only` block's extra operators
    in_place: list = dataclasses.field(default_factory=list)          # one entry per `in_place_allowed` block
    stand_ins: list = dataclasses.field(default_factory=list)         # each `standing_in` block's {name: part}
    cell_stand_ins: list = dataclasses.field(default_factory=list)    # the blocks cu.stand_in opened for the cell
    memory: list = dataclasses.field(default_factory=list)            # TensorMemory blocks (memory.py)
    work: list = dataclasses.field(default_factory=list)              # count_work blocks (kernels.py)
    no_new_processes: list = dataclasses.field(default_factory=list)  # while set, no process may start (processes.py)
    process_logs: list = dataclasses.field(default_factory=list)      # processes_started blocks' logs
    simulated_gpu: list = dataclasses.field(default_factory=list)     # simulated_gpu blocks (device_sim.py)
    verdicts: dict = dataclasses.field(default_factory=dict)          # {grade_id: passed} of the tests run so far


AMBIENT = Ambient()


@dataclasses.dataclass(frozen=True)
class Active:
    """What a call made now runs under: the grader sends it with the call to the student's kernel."""
    forbidden: tuple            # operators refused (every enclosing forbid block's)
    in_place: bool              # the call may change its inputs (a test replaying the student's parts)
    launcher_only: tuple | None  # None, or the operators a launcher may use besides refusals.LAUNCHER_OPS
    stand_ins: dict             # {name: part} standing in for the student's (inner blocks win)
    memory: tuple               # open TensorMemory blocks: the call's memory is added to each
    work: tuple                 # open count_work blocks: the call's kernel launches are counted into each


def active():
    """The Active state of this thread's test, read from AMBIENT."""
    stand_ins = {}
    for parts in AMBIENT.stand_ins:
        stand_ins.update(parts)
    only = tuple(name for names in AMBIENT.launcher_only for name in names) if AMBIENT.launcher_only else None
    return Active(forbidden=tuple(name for names in AMBIENT.forbidden for name in names),
                  in_place=bool(AMBIENT.in_place), launcher_only=only, stand_ins=stand_ins,
                  memory=tuple(AMBIENT.memory), work=tuple(AMBIENT.work))
