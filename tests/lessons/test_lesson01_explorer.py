"""Lesson 1's decoding explorer, driven from Python as a student would drive it."""
import torch

import course_utils as cu
from course_utils import EOS
from course_utils.explorers.decoding import decoding_explorer


def reverse_perfectly(src, src_lengths, max_len):
    return torch.stack([torch.cat([s[:n].flip(0), torch.tensor([EOS])]) for s, n in zip(src, src_lengths)])


def reverse_but_miss_the_last_token(src, src_lengths, max_len):
    out = reverse_perfectly(src, src_lengths, max_len)
    out[:, int(src_lengths[0]) - 1] = 3 if out[0, int(src_lengths[0]) - 1] != 3 else 4
    return out


def unfinished(src, src_lengths, max_len):
    raise NotImplementedError("Exercise not done yet")


def test_moving_the_slider_shows_a_source_of_that_length():
    explorer = decoding_explorer(cu.ReversalTask(seed=0), reverse_perfectly)
    explorer.length_slider.value = 17
    assert "length 17" in explorer.display.value and "exact match" in explorer.display.value
    assert explorer.display.value.count("font-family:monospace") == 17 * 3


def test_new_example_button_changes_the_example():
    explorer = decoding_explorer(cu.ReversalTask(seed=0), reverse_perfectly)
    before = explorer.display.value
    explorer.next_button.click()
    assert explorer.display.value != before and "held-out example 1" in explorer.display.value


def test_wrong_tokens_are_highlighted():
    explorer = decoding_explorer(cu.ReversalTask(seed=0), reverse_but_miss_the_last_token)
    assert "#ffb3b3" in explorer.display.value and "1 token(s) wrong" in explorer.display.value


def test_unfinished_exercise_shows_a_message_not_a_traceback():
    explorer = decoding_explorer(cu.ReversalTask(seed=0), unfinished)
    assert "not finished yet" in explorer.display.value and "Traceback" not in explorer.display.value


def test_slider_covers_the_task_lengths():
    task = cu.ReversalTask(min_len=5, max_len=40)
    explorer = decoding_explorer(task, reverse_perfectly)
    assert (explorer.length_slider.min, explorer.length_slider.max) == (5, 40)
