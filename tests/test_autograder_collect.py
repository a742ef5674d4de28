"""collect: file names and folders, in the shapes instructors get them, to (student, lesson); nothing dropped."""
import zipfile

import nbformat
import pytest

from autograder.collect import collect, lesson_of, student_id

LESSONS = ["01_seq2seq_bottleneck", "02_bahdanau_attention"]


def _nb():
    return nbformat.writes(nbformat.v4.new_notebook())


def _tree(root, files):
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_nb() if rel.endswith(".ipynb") else "x")
    return root


@pytest.mark.parametrize("name", ["02_bahdanau_attention.ipynb", "Copy of 02_bahdanau_attention.ipynb",
                                  "02_bahdanau_attention (1).ipynb", "Copy of 02_bahdanau_attention (2).ipynb",
                                  "02_bahdanau_attention-1.ipynb", "doejane_123_02_bahdanau.ipynb"])
def test_colab_and_lms_names_map_to_the_lesson(name):
    assert lesson_of(name, LESSONS) == "02_bahdanau_attention"


@pytest.mark.parametrize("name", ["homework.ipynb", "03_queries_keys_values.ipynb", "Untitled.ipynb"])
def test_unknown_names_match_no_lesson(name):
    assert lesson_of(name, LESSONS) is None


def test_student_id_from_an_lms_folder_name_is_safe():
    assert student_id("Jane Doe_123_assignsubmission_file_") == "Jane_Doe_123_assignsubmission_file"


def test_one_folder_per_student(tmp_path):
    src = _tree(tmp_path / "in", ["alice/Copy of 01_seq2seq_bottleneck.ipynb", "bob/02_bahdanau_attention (1).ipynb"])
    got = collect(src, tmp_path / "course", LESSONS, log=lambda *_: None)
    assert {(s, l) for _, s, l, _ in got.placed} == {("alice", "01_seq2seq_bottleneck"), ("bob", "02_bahdanau_attention")}
    assert (tmp_path / "course/submitted/alice/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb").exists()
    assert got.problems == []


def test_exchange_layout_keeps_the_latest_submission_and_reports_the_older(tmp_path):
    src = _tree(tmp_path / "inbound", ["alice+01_seq2seq_bottleneck+2024-01-01 10:00:00/01_seq2seq_bottleneck.ipynb",
                                       "alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/01_seq2seq_bottleneck.ipynb"])
    got = collect(src, tmp_path / "course", LESSONS, log=lambda *_: None)
    assert [p[0] for p in got.placed] == ["alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/01_seq2seq_bottleneck.ipynb"]
    assert len(got.problems) == 1 and "older duplicate" in got.problems[0][1]
    stamp = tmp_path / "course/submitted/alice/01_seq2seq_bottleneck/timestamp.txt"
    assert stamp.read_text() == "2024-01-02 10:00:00"


def test_loose_files_are_matched_through_the_roster(tmp_path):
    src = _tree(tmp_path / "downloads", ["doejane_4711_01_seq2seq_bottleneck.ipynb", "Copy of 02_bahdanau_attention.ipynb"])
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,lms_id\njdoe,Jane Doe,4711\nbsmith,Bob Smith,4712\n")
    got = collect(src, tmp_path / "course", LESSONS, roster=roster, log=lambda *_: None)
    assert [(s, l) for _, s, l, _ in got.placed] == [("jdoe", "01_seq2seq_bottleneck")]
    assert got.problems == [("Copy of 02_bahdanau_attention.ipynb",
                             "no roster student matches its folder or file name")]


def test_every_file_not_placed_is_reported_from_a_zip(tmp_path):
    bundle = tmp_path / "downloads.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("alice/01_seq2seq_bottleneck.ipynb", _nb())
        z.writestr("alice/notes.txt", "not a notebook")
        z.writestr("bob/Untitled.ipynb", _nb())
        z.writestr("loose_01_seq2seq_bottleneck.ipynb", _nb())
        z.writestr("__MACOSX/alice/._01_seq2seq_bottleneck.ipynb", "resource fork")
    got = collect(bundle, tmp_path / "course", LESSONS, log=lambda *_: None)
    assert [(s, l) for _, s, l, _ in got.placed] == [("alice", "01_seq2seq_bottleneck")]
    reported = dict(got.problems)
    assert set(reported) == {"alice/notes.txt", "bob/Untitled.ipynb", "loose_01_seq2seq_bottleneck.ipynb"}
    assert "not a notebook" in reported["alice/notes.txt"] and "loose file" in reported["loose_01_seq2seq_bottleneck.ipynb"]
