"""Run a student's kernel in a sandbox: bubblewrap, its own uid, cgroup limits, a private channel.

One job per module:
- `policy`: every rule of what a kernel sees and may do (the allow-list file system as bubblewrap's
  arguments, its environment, its resource limits, a grading run's `sandbox_settings`);
- `launcher`: the process in front of each kernel (run as a script), and the stub that becomes the kernel;
- `cgroups`: one memory + pids cgroup per kernel, and the memory peak of a call read from outside;
- `janitor`: nothing left behind by a killed launcher (`sweep` for what a killed janitor left);
- `system`: the libc calls, the mount table, whether a process runs;
- `probing`: which guarantees hold here (`probe`), said loudly when one does not;
- `manager`: SandboxKernelManager, jupyter's kernel manager starting kernels through the launcher.

launcher.py's docstring tells the whole story; docs/instructors.md's "What the sandbox guarantees" lists
each claim and the test that checks it.
"""
from . import probing
from .cgroups import Cgroups, KernelCgroup, cgroup_bases
from .janitor import sweep
from .launcher import launch, launcher_cmd
from .manager import SandboxKernelManager
from .policy import DEFAULTS, KEEP_ENV, KEEP_ENV_PREFIXES, bwrap_args, bwrap_path, kernel_env, sandbox_settings
from .probing import attempt_name
from .system import MNT_DETACH, alive, libc, mounts

def probe(settings, timeout=120):
    """probing.probe, finding bubblewrap through this package's `bwrap_path` (a test replaces it to see the
    warnings of a machine without bubblewrap)."""
    return probing.probe(settings, timeout, find_bwrap=bwrap_path)


__all__ = ["Cgroups", "DEFAULTS", "KEEP_ENV", "KEEP_ENV_PREFIXES", "MNT_DETACH", "KernelCgroup", "SandboxKernelManager", "alive",
           "attempt_name", "bwrap_args", "bwrap_path", "cgroup_bases", "kernel_env", "launch", "launcher_cmd", "libc",
           "mounts", "probe", "sandbox_settings", "sweep"]
