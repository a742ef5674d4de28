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
from .memory import StorageLedger
from .modes import EagerDispatchMode


class AllocatedMemory(StorageLedger, EagerDispatchMode):
    """Peak and largest bytes of the tensors aten operators create inside a `with` block (forward and backward)."""

    def __enter__(self):
        self._reset()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self._count(func, args, kwargs)
