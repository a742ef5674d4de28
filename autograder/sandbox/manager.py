"""The kernel manager the grader's preprocessor uses: jupyter's, with every kernel started through the launcher."""
import os
import shutil
import tempfile

from jupyter_client.manager import AsyncKernelManager
from traitlets import Dict

from .cgroups import Cgroups
from .launcher import launcher_cmd
from .system import MNT_DETACH, libc


class SandboxKernelManager(AsyncKernelManager):
    """Starts the kernel through the launcher (launcher.py) and talks to it over Unix sockets.

    The connection file and the sockets live in a private runtime directory (0700, owned by
    the kernel's uid; as root, the launcher mounts a 1 MB tmpfs on it for the kernel's
    lifetime), the only channel between the grader and the kernel, which has no network.
    """
    sandbox = Dict({}, help="launcher settings (see autograder.sandbox.DEFAULTS)").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transport = "ipc"
        self._runtime = None

    async def _async_pre_start_kernel(self, **kw):
        if self._runtime is None:
            base = tempfile.gettempdir()
            # short: a Unix socket path has at most 107 bytes
            self._runtime = tempfile.mkdtemp(prefix="ag-", dir=base if len(base) < 64 else "/tmp")
            self.connection_file = os.path.join(self._runtime, "kernel.json")
            self.ip = os.path.join(self._runtime, "k")
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments=None):
        return launcher_cmd(self.sandbox) + super().format_kernel_cmd(extra_arguments)

    async def _async_cleanup_resources(self, restart=False):
        launcher = getattr(self.provisioner, "pid", None)
        await super()._async_cleanup_resources(restart=restart)
        if launcher and os.geteuid() == 0:  # the launcher was killed (shutdown "now") before it could
            Cgroups.existing(str(launcher)).remove()
        if not restart and self._runtime:
            if os.path.ismount(self._runtime):  # the launcher was killed before it could unmount
                libc.umount2(self._runtime.encode(), MNT_DETACH)
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None

    cleanup_resources = _async_cleanup_resources
