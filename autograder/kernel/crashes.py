"""The grader's sentence for a crash of the student's code, by the category the kernel's side found in its message.

The kernel's side (in_kernel/serve.py, CRASH_WORDS) sends only a code from a closed set and a few numbers read
from torch's or numpy's message; the words the student reads are written here, never taken from the kernel."""

# {code: (sentence, sentence with the numbers, how many numbers that one needs)}
SENTENCES = {
    "matmul": ("a matrix product whose inner sizes do not agree: check which operand needs a transpose, and the "
               "sizes of the weights", "a matrix product of a {0}x{1} by a {2}x{3} matrix: the inner sizes must "
               "agree; check which operand needs a transpose, and the sizes of the weights", 4),
    "bmm": ("a (batched) matrix product whose inner sizes do not agree: the last dim of the first operand must "
            "equal the second-to-last of the second; check which operand needs a transpose", "", 0),
    "broadcast": ("two tensors whose shapes do not broadcast: line their dims up (unsqueeze or view where a dim is "
                  "missing)", "two tensors whose shapes do not broadcast (size {0} against {1} at dim {2}): line "
                  "their dims up (unsqueeze or view where a dim is missing)", 3),
    "shapes": ("arrays or tensors whose shapes do not broadcast: line their dims up (keepdims=True, unsqueeze or "
               "view where a dim is missing)", "", 0),
    "view": (".view() on a tensor that is not contiguous (after a transpose or permute): use .reshape(), or "
             ".contiguous().view()", "", 0),
    "reshape": ("a reshape to a shape that holds another number of elements: check the sizes you reshape to", "", 0),
    "truth": ("the truth value of a tensor with more than one element (an if, and, or or on a tensor): use "
              "torch.where, .all() or .any()", "", 0),
    "sorted": ("pack_padded_sequence with lengths not sorted in decreasing order: pass enforce_sorted=False", "", 0),
    "dim": ("a dim the tensor does not have: count dims from the end (dim=-1) so that extra leading dims work",
            "", 0),
    "index": ("an index past the end of a tensor, array or list: check the lengths your loop runs over", "", 0),
    "dtype": ("one operation on tensors of different dtypes (float32 against float64?): compute in the dtype of the "
              "inputs", "", 0),
    "device": ("one operation on tensors on different devices: create new tensors on the inputs' device "
               "(device=x.device)", "", 0),
    "inplace": ("an in-place change of a tensor that autograd needs for the backward pass: use the out-of-place "
                "form (masked_fill, not masked_fill_; x = x + y, not x += y)", "", 0),
    "gradcount": ("a backward that returns the wrong number of gradients, or one of the wrong shape: it returns one "
                  "gradient per input of forward, shaped like that input (None for an input that needs none)", "", 0),
    "twice": ("a backward pass through the same graph twice", "", 0),
    # the words of course_utils' own message (charged_once.local_call_with_grads) kept, so that a test reads one
    # phrase in the student's notebook and when graded
    "nograd": ("a backward pass through a result that is not connected to its inputs: it does not depend on the "
               "inputs or parameters through autograd (a .detach(), torch.no_grad() or numpy on the way?)", "", 0),
    "numpy": (".numpy() on a tensor that requires grad: keep the computation in torch where gradients flow", "", 0),
    "unpack": ("unpacking a different number of values than there are: does each function return what its exercise "
               "asks (for example a pair (output, weights))?", "", 0),
    "none": ("an operation on None: does every function `return` its result?", "", 0),
    "permute": ("permute with a different number of dims than the tensor has", "", 0),
    "cat": ("torch.cat or torch.stack of tensors whose sizes differ outside the joined dim", "", 0),
    "indices": ("more indices than the tensor has dims", "", 0),
    "belowlaunch": ("a Triton kernel run through the interpreter's executor directly (GridExecutor), below a launch, "
                    "which the grader refuses while it counts a call: launch it as kernel[grid](...), which the grader "
                    "runs and counts", "", 0),
}


def sentence(answer):
    """The grader's sentence for a failed request's crash category (an answer dict), or "" for none."""
    code = answer.get("category")
    if type(code) is not str or code not in SENTENCES:
        return ""
    plain, with_numbers, needed = SENTENCES[code]
    numbers = answer.get("numbers")
    if needed and type(numbers) is list and len(numbers) >= needed and all(type(n) is int for n in numbers):
        picked = numbers[-needed:] if code == "matmul" else numbers[:needed]
        return with_numbers.format(*picked)
    return plain
