"""Run a student's kernel in a sandbox: bubblewrap, its own uid, cgroup limits, a private channel.

One job per module:
- `limits`: every limit of a graded notebook, times included, with its unit and help (standard library only);
- `policy`: every rule of what a kernel sees and may do (the allow-list file system as bubblewrap's
  arguments, its environment, its resource limits, a grading run's `sandbox_settings`);
- `launcher`: the process in front of each kernel (run as a script), and the stub that becomes the kernel;
- `cgroups`: one memory + pids cgroup per kernel, and the memory peak of a call read from outside;
- `janitor`: nothing left behind by a killed launcher (`sweep` for what a killed janitor left);
- `system`: the libc calls, the mount table, whether a process runs;
- `probing`: which guarantees hold here (`probe`), said loudly when one does not;
- `manager`: SandboxKernelManager, jupyter's kernel manager starting kernels through the launcher;
- `clock`: what a kernel's processes ran and waited for a core.

launcher.py's docstring tells the whole story; docs/instructors.md's "What the sandbox guarantees" lists
each claim and the test that checks it.

The names below are this package's face, imported from here by the rest of the autograder; each is read from its
module when first used (PEP 562), so that importing one module of the sandbox (`limits`, `clock`) does not start
the others (`manager` imports jupyter_client).
"""
import importlib

_FACE = {"Cgroups": "cgroups", "KernelCgroup": "cgroups", "cgroup_bases": "cgroups", "sweep": "janitor",
         "launch": "launcher", "launcher_cmd": "launcher", "SandboxKernelManager": "manager",
         "DEFAULTS": "policy", "KEEP_ENV": "policy", "KEEP_ENV_PREFIXES": "policy", "bwrap_args": "policy",
         "bwrap_path": "policy", "kernel_env": "policy", "sandbox_settings": "policy",
         "attempt_name": "probing", "probe": "probing",
         "MNT_DETACH": "system", "alive": "system", "libc": "system", "mounts": "system"}
__all__ = sorted(_FACE)


def __getattr__(name):
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
