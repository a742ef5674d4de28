"""The course's dispatch modes run their operators as they are, with no import of torch._dynamo."""
import subprocess
import sys

WATCHED = """
import sys, torch
from course_utils.allocations import AllocatedMemory
from course_utils.checks import ForbiddenCall
from course_utils.refusals import forbidden_ops
from course_utils.kernels import count_eager_bytes
x = torch.randn(4, 8)
with forbidden_ops("torch.nn.functional.scaled_dot_product_attention"):
    y = torch.softmax(x @ x.T, -1)
try:
    with forbidden_ops("torch.nn.functional.scaled_dot_product_attention"):
        torch.ops.aten.scaled_dot_product_attention(x[None], x[None], x[None])
    refused = False
except ForbiddenCall:
    refused = True
with AllocatedMemory() as memory:
    z = x @ x.T
_, read, written = count_eager_bytes(torch.add, x, x)
print(refused, memory.peak_bytes, read, written, "torch._dynamo" in sys.modules)
"""


def test_forbidding_and_counting_never_import_torch_dynamo():
    """PyTorch wraps a mode's __torch_dispatch__ in torch._dynamo.disable unless it opts out (course_utils/modes.py);
    the wrapper's first call imports torch._dynamo, 1.5 CPU-s in every notebook that checks a forbidden operator."""
    done = subprocess.run([sys.executable, "-c", WATCHED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    refused, peak, read, written, dynamo = done.stdout.split()
    assert (refused, int(peak), int(read), int(written)) == ("True", 4 * 4 * 4, 2 * 4 * 8 * 4, 4 * 8 * 4)
    assert dynamo == "False", "a dispatch mode imported torch._dynamo: derive it from course_utils.modes.EagerDispatchMode"
