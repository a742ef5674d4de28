"""course_utils.memory.TensorMemory: what it counts, and what its own counting costs the modes beside it."""
import torch
from torch.overrides import TorchFunctionMode

from course_utils.allocations import AllocatedMemory
from course_utils.memory import TensorMemory


class Seen(TorchFunctionMode):
    """The names of the torch functions that reach this mode."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_each_new_storage_is_counted_once_views_and_inputs_are_free():
    x = torch.randn(64, 64)
    with TensorMemory() as mem:
        y = torch.exp(x)                    # 16 KiB, new
        view = y[:8].T                      # a view: free
        x.mul_(2)                           # in place on an input: free
        z = x[:32]                          # a view of an input: free
    assert (mem.peak_bytes, mem.largest_bytes) == (64 * 64 * 4, 64 * 64 * 4)
    del y, view, z


def test_results_in_named_tuples_and_lists_are_counted_and_released_when_they_die():
    x = torch.randn(1000, 10, dtype=torch.float64)
    with TensorMemory() as mem:
        values, indices = torch.max(x, dim=1)       # torch.return_types.max: 8000 + 8000 bytes
        parts = torch.split(torch.exp(x), 500)      # 80000 bytes, one storage shared by both parts
        assert mem.live_bytes == 8000 + 8000 + 80000
        del values, indices, parts
        assert mem.live_bytes == 0
    assert mem.peak_bytes == 96000 and mem.largest_bytes == 80000


def test_the_counting_itself_reaches_no_other_mode():
    """Its own looks at a tensor (device, storage) are torch functions: a refusal or a second meter beside it saw
    each of them, several calls for every counted operator (lesson 9's measured backward ran 3x slower)."""
    x = torch.randn(8, 8)
    with Seen() as seen, TensorMemory(), AllocatedMemory():
        torch.exp(x) @ x
    assert seen.names == ["exp", "matmul"]
