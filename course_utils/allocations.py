"""Count the memory a whole training step allocates, the backward pass included.

`course_utils.memory.TensorMemory` watches the torch functions called from Python. The
backward pass of PyTorch's own operators runs inside autograd's C++ engine, which calls no
Python function, so TensorMemory does not see the gradients' intermediates (the softmax's
backward, the (L, L) gradient of the scores). This meter sits one level lower, as a
`TorchDispatchMode`: it sees every aten operator that runs, forward or backward, and counts
each tensor an operator returns (its storage, once) while it is alive.

    with AllocatedMemory() as mem:
        out = attention(q, k, v)
        out.backward(grad)
    mem.peak_bytes      # most bytes alive at once, counting only tensors made inside the block
    mem.largest_bytes   # the single largest tensor made inside the block

Buffers an operator uses internally and frees before returning are not seen (nor are the
workspaces of fused kernels); gradients accumulated into `.grad` are counted when they are made.
"""
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class AllocatedMemory(TorchDispatchMode):
    """Peak and largest bytes of the tensors aten operators create inside a `with` block (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.live_bytes = 0
        self.peak_bytes = 0
        self.largest_bytes = 0
        self._users = {}  # storage key -> [number of live tensors, bytes]

    def __enter__(self):
        self.live_bytes = self.peak_bytes = self.largest_bytes = 0
        self._users = {}
        return super().__enter__()

    def _release(self, key):
        entry = self._users.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.live_bytes -= entry[1]
            del self._users[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        known = {self._key(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            key = self._key(tensor)
            if key in self._users:
                self._users[key][0] += 1
            elif key in known:  # a view of an input, or an in-place result
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
        return (tensor.device.type, tensor.device.index, tensor.untyped_storage().data_ptr())
