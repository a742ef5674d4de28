"""Lesson 6's positional-encoding explorer, driven from Python through its widgets."""
import numpy as np
import torch

from course_utils.explorers.positions import PositionalEncodingExplorer


def sinusoidal(max_len, d_model):
    """A correct encoding written out, standing in for the student's."""
    t = torch.arange(max_len, dtype=torch.float64)[:, None]
    j = torch.arange(d_model)[None, :]
    angle = t / 10000.0 ** ((j - j % 2).double() / d_model)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle)).float()


def test_shows_the_table_and_the_chosen_row_and_column(tmp_path):
    explorer = PositionalEncodingExplorer(sinusoidal, d_model=64, max_len=100)
    assert explorer.pe.shape == (100, 64)
    assert explorer.position.max == 99 and explorer.dimension.max == 63
    explorer.position.value = 30
    explorer.dimension.value = 5
    assert "Dimension 5 is the cosine of pair 2" in explorer.message.value
    assert f"{np.cos(30 / 10000 ** (4 / 64)):+.3f}" in explorer.message.value
    explorer.figure.savefig(tmp_path / "explorer.png")
    # the similarity is PE(s) . PE(30) for every s, peaking at s = 30 with value d_model / 2
    assert explorer.similarity.shape == (100,)
    assert int(np.argmax(explorer.similarity)) == 30
    assert abs(explorer.similarity[30] - 32) < 1e-4


def test_similarity_depends_only_on_the_offset():
    explorer = PositionalEncodingExplorer(sinusoidal, d_model=32, max_len=120)
    explorer.position.value = 20
    first = explorer.similarity[20:60].copy()
    explorer.position.value = 70
    np.testing.assert_allclose(explorer.similarity[70:110], first, atol=1e-4)


def test_changing_the_sizes_updates_the_sliders():
    explorer = PositionalEncodingExplorer(sinusoidal, d_model=64, max_len=100)
    explorer.position.value = 90
    explorer.dimension.value = 60
    explorer.d_model.value = "16"
    explorer.max_len.value = "50"
    assert explorer.pe.shape == (50, 16)
    assert explorer.position.max == 49 and explorer.position.value <= 49
    assert explorer.dimension.max == 15 and explorer.dimension.value <= 15
    assert explorer.similarity.shape == (50,)


def test_bad_input_gives_a_message_not_a_traceback():
    explorer = PositionalEncodingExplorer(sinusoidal)
    for field, text, expected in [("d_model", "", "d_model is empty"), ("d_model", "abc", "whole number"),
                                  ("d_model", "0", "from 2 to"), ("d_model", "100000", "from 2 to"),
                                  ("max_len", "0", "max_len must be from 1"), ("max_len", "-3", "max_len must be"),
                                  ("max_len", "2.5", "whole number")]:
        explorer.d_model.value, explorer.max_len.value = "64", "100"
        getattr(explorer, field).value = text
        assert expected in explorer.message.value, (field, text, explorer.message.value)
        assert explorer.pe is None
    explorer.d_model.value, explorer.max_len.value = "64", "100"
    assert explorer.pe is not None


def test_odd_d_model_works_or_reports_the_students_error():
    explorer = PositionalEncodingExplorer(sinusoidal)
    explorer.d_model.value = "7"
    assert explorer.pe.shape == (100, 7)

    def even_only(max_len, d_model):
        if d_model % 2:
            raise ValueError("d_model must be even")
        return sinusoidal(max_len, d_model)

    explorer = PositionalEncodingExplorer(even_only)
    explorer.d_model.value = "7"
    assert "d_model must be even" in explorer.message.value
    assert explorer.pe is None


def test_unfinished_or_broken_function_gives_a_message():
    def unfinished(max_len, d_model):
        raise NotImplementedError("Exercise not done yet")

    explorer = PositionalEncodingExplorer(unfinished)
    assert "not finished" in explorer.message.value
    assert explorer.pe is None

    explorer = PositionalEncodingExplorer(lambda n, d: torch.zeros(d, n))
    assert "expected (100, 64)" in explorer.message.value

    explorer = PositionalEncodingExplorer(lambda n, d: torch.full((n, d), float("nan")))
    assert "NaN" in explorer.message.value
