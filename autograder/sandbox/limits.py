"""The limits of one graded notebook, declared once: each with its default, its unit and its help.

The command line (`python -m autograder grade --memory-mb ...`), a grading run's nbgrader traits
(settings.grading_config) and the sandbox launcher's settings (policy.DEFAULTS, policy.sandbox_settings)
all read them here. Standard library only: the launcher imports this folder's modules as plain modules.
"""
import dataclasses

HARD_LIMIT_GRACE_S = 60  # beyond the notebook budget: kernel start, sanitizing, saving grades


def _limit(default, flag, metavar, help):
    return dataclasses.field(default=default, metadata=dict(flag=flag, metavar=metavar, help=help))


@dataclasses.dataclass
class Limits:
    cell_timeout: int = _limit(
        None, "--cell-timeout", "S", "seconds one cell may run before it is interrupted (default: Execute.timeout "
        "in autograder/nbgrader_config.py, 120 s, the same as plain nbgrader)")
    notebook_timeout: int = _limit(
        300, "--notebook-timeout", "S", "seconds of execution for one notebook; later cells are not run "
        f"(default %(default)s); a worker still running {HARD_LIMIT_GRACE_S} s later is killed")
    memory_mb: int = _limit(
        4096, "--memory-mb", "MB", "memory of each kernel: its resident memory (a cgroup) when grading as root, "
        "else its address space (RLIMIT_AS) (default %(default)s)")
    nproc: int = _limit(
        512, "--nproc", "N", "processes and threads of each kernel: a pids cgroup when grading as root, and "
        "RLIMIT_NPROC of the kernel's user (default %(default)s)")
    fsize_mb: int = _limit(
        64, "--fsize-mb", "MB", "largest file a kernel may write (RLIMIT_FSIZE) (default %(default)s)")
    output_kb: int = _limit(
        512, "--output-kb", "KB", "output kept per cell; the rest is dropped (default %(default)s)")

    def for_the_sandbox(self):
        """The launcher's share: {memory_mb, nproc, fsize_mb, cpu_s} (cpu_s: the notebook budget and the grace,
        on every core)."""
        import os
        return dict(memory_mb=self.memory_mb, nproc=self.nproc, fsize_mb=self.fsize_mb,
                    cpu_s=(self.notebook_timeout + HARD_LIMIT_GRACE_S) * (os.cpu_count() or 1))


def add_arguments(parser):
    """One command-line option per limit, with its default and help."""
    for field in dataclasses.fields(Limits):
        meta = field.metadata
        parser.add_argument(meta["flag"], dest=field.name, type=int, default=field.default, metavar=meta["metavar"],
                            help=meta["help"])


def from_arguments(args):
    """The Limits that add_arguments' options were given."""
    return Limits(**{field.name: getattr(args, field.name) for field in dataclasses.fields(Limits)})
