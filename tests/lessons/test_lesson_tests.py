"""Every graded test cell of every lesson passes its own solution and holds hidden tests."""
import re

import pytest

from tests.nbtools import LESSONS, LessonCode

CELLS = [(lesson, test_id) for lesson in LESSONS for test_id in LessonCode(lesson).tests]


@pytest.mark.parametrize("lesson, test_id", CELLS)
def test_test_cell_passes_the_solution(lesson, test_id):
    LessonCode(lesson).run_test_cell(test_id)


_GRADER_SIDE = {}


@pytest.mark.parametrize("lesson, test_id", CELLS)
def test_test_cell_passes_the_solution_on_the_grader_side(lesson, test_id):
    """The way grading runs it (autograder.kernel.verdicts: the cell outside the kernel, answers through handles)."""
    if lesson not in _GRADER_SIDE:
        _GRADER_SIDE[lesson] = LessonCode(lesson).run_all_test_cells()
    failure = _GRADER_SIDE[lesson][test_id]
    assert failure is None, f"{lesson} {test_id} fails on the grader's side: {type(failure).__name__}: {failure}"


@pytest.mark.parametrize("lesson, test_id", CELLS)
def test_test_cell_has_hidden_tests(lesson, test_id):
    source = LessonCode(lesson).tests[test_id]
    assert re.search(r"### BEGIN HIDDEN TESTS\n.+### END HIDDEN TESTS", source, re.S), (lesson, test_id)


# the graded test cells each lesson must keep (a renamed or lost grade_id breaks grading)
EXPECTED_TEST_CELLS = {
    "01_seq2seq_bottleneck": ["test_encoder", "test_decoder_step", "test_seq2seq_forward", "test_sequence_loss",
                              "test_greedy_decode", "test_beam_search", "test_concepts"],
    "02_bahdanau_attention": ["test_additive_score", "test_attention_weights", "test_attend", "test_bahdanau_decoder",
                              "test_dot_score", "test_general_score", "test_concepts"],
    "03_queries_keys_values": ["test_softmax", "test_attention_np", "test_attention_torch", "test_self_attention",
                               "test_permutation_gap", "test_concepts"],
    "04_masking": ["test_masks", "test_attention_mask", "test_concept_pairs", "test_masked_attention",
                   "test_concept_causal", "test_to_mha_masks"],
    "05_multi_head_attention": ["test_split_heads", "test_merge_heads", "test_multi_head_attention",
                                "test_concept_cross", "test_load_from_torch", "test_concept_params"],
    "06_positional_encoding": ["test_sinusoidal", "test_concept_wavelength", "test_positional_encoding_module",
                               "test_shift_matrix", "test_concept_new_positions"],
    "07_transformer": ["test_feed_forward", "test_encoder_block", "test_decoder_block", "test_transformer",
                       "test_greedy_decode", "test_tiny_gpt", "test_next_token_loss", "test_sample",
                       "test_top_k", "test_top_p"],
    "08_fast_attention": ["test_causal_mask", "test_kv_cache", "test_cached_self_attention",
                          "test_online_softmax_update", "test_tiled_attention", "test_grouped_query_attention",
                          "test_rope", "test_sliding_window_mask"],
    "09_flash_backward_and_batching": ["test_flash_forward", "test_flash_backward", "test_flash_attention",
                                       "test_left_pad", "test_static_kv_cache", "test_decode_batch"],
    "10_linear_attention": ["test_linear_attention_parallel", "test_linear_attention_step",
                            "test_linear_attention_chunked", "test_gated_linear_attention", "test_delta_rule_step",
                            "test_concepts"],
    "11_flash_attention_kernel": ["test_softmax_rows", "test_flash_forward", "test_flash_backward",
                                  "test_flash_attention"],
}


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_keeps_its_graded_test_cells(lesson):
    assert list(LessonCode(lesson).tests) == EXPECTED_TEST_CELLS[lesson]
