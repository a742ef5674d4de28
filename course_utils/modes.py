"""The base of the course's dispatch modes, which watch PyTorch's operators as they run eagerly."""
from torch.utils._python_dispatch import TorchDispatchMode


class EagerDispatchMode(TorchDispatchMode):
    """A TorchDispatchMode whose `__torch_dispatch__` PyTorch leaves unwrapped.

    Unless a mode opts out, PyTorch wraps its `__torch_dispatch__` in `torch._dynamo.disable`, and the wrapper's
    first call imports torch._dynamo: 1.5 CPU-s, measured, in every notebook at its first forbidden-operator check
    or memory count (a fifth of grading a lesson-03 notebook: 5.5 s with it, 4.4 without). The wrapper keeps
    torch.compile from compiling the mode's own frame; the course's modes only look at an operator and run it, so
    there is nothing to compile.
    """

    @classmethod
    def _should_skip_dynamo(cls):
        return False
