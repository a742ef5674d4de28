"""course_utils.diagnosis and the checks that use it: a failed check names the mistake behind it."""
import numpy as np
import pytest
import torch

import course_utils as cu
from course_utils.diagnosis import DIAGNOSIS, describe_shape, fingerprint, mistake_of


def _message(check, *args, **kwargs):
    with pytest.raises(AssertionError) as caught:
        check(*args, **kwargs)
    return str(caught.value)


def test_an_all_nan_answer_is_reported_as_nan_not_a_crash_of_the_check():
    message = _message(cu.check_close, torch.full((2, 3), float("nan")), torch.ones(2, 3), "weights")
    assert "NaN in every entry" in message
    partly = _message(cu.check_close, np.array([1.0, np.nan, np.inf]), np.ones(3), "w")
    assert "NaN in 2 of 3 entries" in partly or "inf" in partly


@pytest.mark.parametrize("got, expected, words", [
    ((4, 8, 6), (4, 6, 8), "dims 1 and 2 are swapped"),
    ((2, 1, 5), (2, 5), "an extra dim of size 1 at position 1"),
    ((2, 5), (2, 3, 5), "dim 1 (size 3) is missing"),
    ((2, 4), (2, 5), "(one short)"),
    ((2, 6), (2, 5), "(one too many)"),
    ((3, 4), (3, None), None),
])
def test_a_wrong_shape_is_described(got, expected, words):
    if words is None:
        cu.check_shape(torch.zeros(got), expected, "x")
        return
    assert words in describe_shape(got, expected)
    assert words in _message(cu.check_shape, torch.zeros(got), expected, "x")


def test_the_one_matching_mistake_is_named_and_only_on_failure():
    q = torch.randn(4, 8)
    right = torch.softmax(q / 8 ** 0.5, -1)
    mistakes = {"the scores are divided by d_k: scale by 1 / sqrt(d_k)": lambda: torch.softmax(q / 8, -1),
                "no scale: divide the scores by sqrt(d_k)": lambda: torch.softmax(q, -1),
                "a mistake that cannot be computed here": lambda: 1 / 0}
    message = _message(cu.check_close, torch.softmax(q / 8, -1), right, "weights", mistakes=mistakes)
    assert message.startswith(DIAGNOSIS + "the scores are divided by d_k")
    assert mistake_of(message) == "the scores are divided by d_k: scale by 1 / sqrt(d_k)"
    called = []
    cu.check_close(right, right, "weights", mistakes={"x": lambda: called.append(1)})
    assert not called  # a passing check computes no mistake


def test_no_mistake_is_named_when_two_match_or_the_mistake_equals_the_right_answer():
    right = np.ones(3)
    assert fingerprint(np.zeros(3), right, {"a": np.zeros(3), "b": np.zeros(3)}, 1e-6, 1e-6) is None
    assert fingerprint(np.ones(3), right, {"same as right": np.ones(3)}, 1e-6, 1e-6) is None
    message = _message(cu.check_close, np.full(3, 2.0), right, "v", hint="the rule is ...",
                       mistakes={"zeros": np.zeros(3)})
    assert "None of the mistakes this check knows matches. the rule is ..." in message and DIAGNOSIS not in message


def test_a_crash_names_its_case_and_an_expected_error_is_checked():
    with pytest.raises(AssertionError, match=r"rope with odd d = 7 raised RuntimeError.*asks for a ValueError"):
        with cu.raises(ValueError, "rope with odd d = 7", why="the exercise asks for a ValueError"):
            raise RuntimeError("boom")
    with pytest.raises(AssertionError, match="returned without raising ValueError"):
        with cu.raises(ValueError, "rope with odd d = 7"):
            pass
    with cu.raises(ValueError, "rope with odd d = 7"):
        raise ValueError("odd")
    with pytest.raises(AssertionError, match=r"keys of another length raised RuntimeError: project keys.*\[shapes\]"):
        with cu.case("keys of another length", why="project keys and values from key and value"):
            raise RuntimeError("shapes")
    with pytest.raises(NotImplementedError):
        with cu.case("unfinished"):
            raise NotImplementedError


def test_a_concept_number_gets_the_reason_of_the_mistake_it_equals_never_the_right_value():
    reasons = {"MB, not MiB: divide by 2**20": 4.0, "bits, not bytes": 32 * 2**20 / 2**20}
    assert cu.number_mistake(4.0, 1e6 * 4 / 2**20, reasons) == "MB, not MiB: divide by 2**20"
    assert cu.number_mistake(5.0, 1e6 * 4 / 2**20, reasons) is None


def test_a_crash_category_becomes_the_graders_sentence_and_no_student_text():
    from autograder.kernel import crashes, in_kernel
    torch_message = "mat1 and mat2 shapes cannot be multiplied (6x8 and 4x8)"
    answer = in_kernel._crash_category(RuntimeError(torch_message))
    assert answer == {"category": "matmul", "numbers": [6, 8, 4, 8]}
    assert crashes.sentence(answer).startswith("a matrix product of a 6x8 by a 4x8 matrix")
    assert in_kernel._crash_category(RuntimeError("my own words, secret 123")) == {}
    assert crashes.sentence({"category": "<script>"}) == ""
    codes = {code for code, _ in in_kernel.CRASH_WORDS}
    assert codes == set(crashes.SENTENCES), "every category the kernel can send has the grader's sentence"
