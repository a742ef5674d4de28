"""Count the memory of the tensors an operation allocates (CPU or GPU, any PyTorch code).

Python's tracemalloc cannot see torch's allocations, and the profiler's memory
events are not reliable on CPU, so this watches every PyTorch call made from
Python through a `TorchFunctionMode`: each tensor a call returns is counted while
it is alive (its storage, once, however many views share it). Buffers a single
operation uses internally and frees before returning are not seen.

    with TensorMemory() as mem:
        out = attention(q, k, v)
    mem.peak_bytes      # most bytes alive at once, counting only tensors made inside the block
    mem.largest_bytes   # the single largest tensor made inside the block

`TensorMemory(resident=True)` asks, where the grader runs the block's calls in a student's kernel, for the
memory the kernel's processes made resident during each call, measured from outside through the kernel's
memory cgroup (`mem.resident_bytes`; None where nothing measured it: in your own notebook, or a grader without
root). `mem.held_bytes` is the larger of that and `peak_bytes`. It sees what no tensor count can (numpy,
threads, child processes) but also the kernel's own few megabytes of decoding and encoding, so a test reads
it only at sizes where the memory it forbids is tens of megabytes.
"""
import weakref

import torch
from torch.overrides import TorchFunctionMode
from .ambient import AMBIENT




def measuring():
    """The TensorMemory blocks now open, innermost last."""
    return list(AMBIENT.memory)


class StorageLedger:
    """The bytes of the tensors that operations return, each storage counted once while a tensor uses it.

    Shared by TensorMemory (calls from Python) and allocations.AllocatedMemory (aten operators).
    """

    def __init__(self):
        super().__init__()
        self._reset()

    def _reset(self):
        self.live_bytes = self.peak_bytes = self.largest_bytes = 0
        self._users = {}  # storage key -> [number of live tensors, bytes]

    def _release(self, key):
        entry = self._users.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.live_bytes -= entry[1]
            del self._users[key]

    def _count(self, func, args, kwargs):
        """Run func(*args, **kwargs) and count every new storage among the tensors it returns."""
        with _unwatched():
            known = {self._key(t) for t in tensors_in((args, kwargs))}
        out = func(*args, **(kwargs or {}))
        with _unwatched():
            for tensor in tensors_in(out):
                key = self._key(tensor)
                entry = self._users.get(key)
                if entry is not None:
                    entry[0] += 1
                elif key in known:  # a view of a tensor from before the block, or an in-place result
                    continue
                else:
                    size = tensor.untyped_storage().nbytes()
                    self._users[key] = [1, size]
                    self.live_bytes += size
                    self.largest_bytes = max(self.largest_bytes, size)
                    self.peak_bytes = max(self.peak_bytes, self.live_bytes)
                weakref.finalize(tensor, self._release, key)
        return out

    @staticmethod
    def _key(tensor):
        device = tensor.device
        return (device.type, device.index, tensor.untyped_storage().data_ptr())


# The ledger's own looks at a tensor (its device, its storage) are torch functions too: run with torch function
# modes off, so that no mode open beside this one (a refusal, a second meter) sees and checks each of them (they
# made each counted operator about eight calls of the refusal's mode in lesson 9's measured backward pass).
_unwatched = torch._C.DisableTorchFunction


def tensors_in(value):
    """The tensors in an operator's arguments or results (or any value): through tuples (named ones,
    torch.return_types), lists and dict values, as torch's pytree walks them but without its cost per leaf, and
    without recursion, however deep the value."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


class TensorMemory(StorageLedger, TorchFunctionMode):
    """Peak and largest bytes of the tensors created inside a `with` block.

    Tensors that existed before the block (inputs, weights) are not counted;
    a view of one is free. Storages are counted once, while any tensor that
    uses them is alive.
    """

    def __init__(self, resident=False):
        super().__init__()
        self.resident = bool(resident)
        self.resident_bytes = None

    @property
    def held_bytes(self):
        """The most bytes held at once by the best measurement here: resident_bytes where the grader measured it."""
        return max(self.peak_bytes, self.resident_bytes or 0)

    def __enter__(self):
        self._reset()
        self.resident_bytes = None
        AMBIENT.memory.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        if self in AMBIENT.memory:
            AMBIENT.memory.remove(self)
        return super().__exit__(*exc)

    def absorb(self, peak_bytes, largest_bytes, resident_bytes=None):
        """Count a call measured elsewhere (the student's kernel, when the grader runs the test)."""
        self.peak_bytes = max(self.peak_bytes, self.live_bytes + int(peak_bytes))
        self.largest_bytes = max(self.largest_bytes, int(largest_bytes))
        if resident_bytes is not None:
            self.resident_bytes = max(self.resident_bytes or 0, int(resident_bytes))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self._count(func, args, kwargs)
