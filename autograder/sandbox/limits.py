"""The limits of one graded notebook, declared once: every time and every size, each with its default, unit and help.

Readers: the command line (`python -m autograder grade --cell-timeout ...`: one option per field), nbgrader_config.py
(the cell's limit plain nbgrader uses too), a grading run's nbgrader traits (run/settings.py), the run's hard limit
per worker (run/grading.py) and the sandbox launcher's settings (policy.DEFAULTS, policy.sandbox_settings). A value
that is not a positive whole number is refused here, with the option's name: nbclient reads a cell timeout of -1 or
None as "no limit", and a grading without one could wait for ever on a student's loop.
Standard library only: the launcher imports this folder's modules as plain modules.
"""
import argparse
import dataclasses


def _limit(default, unit, help):
    return dataclasses.field(default=default, metadata=dict(unit=unit, help=help))


@dataclasses.dataclass(frozen=True)
class Limits:
    cell_timeout: int = _limit(120, "s", "one cell may run, a test cell on the grader's side included, before it is "
                                         "interrupted (plain nbgrader with autograder/nbgrader_config.py too)")
    notebook_timeout: int = _limit(300, "s", "of execution for one notebook; later cells are not run")
    hard_limit_grace: int = _limit(60, "s", "after the notebook's budget before its worker is killed (the kernel's "
                                            "start, sanitizing, saving grades)")
    iopub_timeout: int = _limit(30, "s", "to wait for a cell's output still arriving after its reply (a busy "
                                         "machine)")
    integrity_timeout: int = _limit(30, "s", "to wait for the integrity check's answer after a test cell (its "
                                             "first, which imports torch, may take a cell's time)")
    memory_mb: int = _limit(4096, "MB", "of memory for each kernel: its resident memory (a cgroup) when grading as "
                                        "root, else its address space (RLIMIT_AS)")
    nproc: int = _limit(512, "processes", "and threads of each kernel: a pids cgroup when grading as root, and "
                                          "RLIMIT_NPROC of the kernel's user")
    fsize_mb: int = _limit(64, "MB", "in the largest file a kernel may write (RLIMIT_FSIZE)")
    output_kb: int = _limit(512, "KB", "of output kept per cell; the rest is dropped")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            refusal = refused(getattr(self, field.name), field.metadata["unit"])
            if refusal:
                raise ValueError(f"Limits.{field.name} ({option(field)}) {refusal}")

    def for_the_sandbox(self):
        """The launcher's share: {memory_mb, nproc, fsize_mb, cpu_s} (cpu_s: the notebook budget and the grace,
        on every core)."""
        import os
        return dict(memory_mb=self.memory_mb, nproc=self.nproc, fsize_mb=self.fsize_mb,
                    cpu_s=(self.notebook_timeout + self.hard_limit_grace) * (os.cpu_count() or 1))


def option(field):
    """The command-line option of a Limits field: --cell-timeout for cell_timeout."""
    return "--" + field.name.replace("_", "-")


def refused(value, unit="s"):
    """Why `value` cannot be a limit in `unit` ("must be ..."), or None when it can."""
    if type(value) is int and value > 0:
        return None
    return (f"must be a whole number of {'seconds' if unit == 's' else unit} above 0, not {value!r}: every grading "
            "has its limits (for a long one, give a large number)")


def add_arguments(parser):
    """One command-line option per limit, with its unit, default and help; a value that is not a limit is refused
    with the option's name."""
    for field in dataclasses.fields(Limits):
        unit = field.metadata["unit"]
        parser.add_argument(option(field), dest=field.name, type=_parser_of(field), default=field.default,
                            metavar=unit.upper() if len(unit) <= 2 else "N",
                            help=f"{'seconds' if unit == 's' else unit} {field.metadata['help']} (default %(default)s)")


def _parser_of(field):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = text
        refusal = refused(value, field.metadata["unit"])
        if refusal:
            raise argparse.ArgumentTypeError(refusal)
        return value
    return parse


def from_arguments(args):
    """The Limits that add_arguments' options were given."""
    return Limits(**{field.name: getattr(args, field.name) for field in dataclasses.fields(Limits)})
