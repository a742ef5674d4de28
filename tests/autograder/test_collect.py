"""collect: file names and folders, in the shapes instructors get them, to (student, lesson); nothing dropped."""
import csv
import json
import shutil
import struct
import time
import unicodedata
import zipfile

import nbformat
import pytest

from autograder.collect import collect, download_number, match_lesson, read_roster, student_id

LESSONS = ["01_seq2seq_bottleneck", "02_bahdanau_attention", "03_queries_keys_values"]
quiet = dict(log=lambda *_: None)


def _nb(text="blank"):
    return nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)]))


def _tree(root, files):
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_nb() if rel.lower().endswith(".ipynb") else "x")
    return root


def _zip(path, entries):
    """entries: (name, text) or (name, text, (Y, M, D, h, m, s)); written in this order."""
    with zipfile.ZipFile(path, "w") as z:
        for name, text, *when in entries:
            info = zipfile.ZipInfo(name, date_time=when[0] if when else (2024, 3, 1, 12, 0, 0))
            z.writestr(info, text)
    return path


def _utc_zip_info(name, epoch_seconds):
    """A zip entry with the extended-timestamp field (UTC modification time), as Info-ZIP and macOS write it."""
    info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
    info.extra = struct.pack("<HHBi", 0x5455, 5, 1, epoch_seconds)
    return info


def _submitted(course, student, lesson):
    return (course / "submitted" / student / lesson / f"{lesson}.ipynb").read_text()


def _pairs(got):
    return sorted((s, l) for _, s, l, _ in got.placed)


@pytest.fixture(scope="session")
def empty_gradebook(tmp_path_factory):
    """One empty gradebook, made once: creating one takes seconds (nbgrader runs its migrations)."""
    from nbgrader.api import Gradebook
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}"):
        pass
    return path


@pytest.fixture(autouse=True)
def course_with_gradebook(tmp_path, empty_gradebook):
    """tmp_path/course starts as a course directory with an empty gradebook, as `release` leaves it."""
    (tmp_path / "course").mkdir()
    shutil.copyfile(empty_gradebook, tmp_path / "course" / "gradebook.db")


@pytest.fixture
def utc(monkeypatch):
    """Zip times without a time zone are local times: pin the local zone to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# ---------------------------------------------------------------- lesson and student from names

@pytest.mark.parametrize("name", ["02_bahdanau_attention.ipynb", "Copy of 02_bahdanau_attention.ipynb",
                                  "02_bahdanau_attention (1).ipynb", "Copy of 02_bahdanau_attention (2).ipynb",
                                  "02_bahdanau_attention-1.ipynb", "doejane_123_02_bahdanau.ipynb",
                                  "COPY OF 02_BAHDANAU_ATTENTION.IPYNB", "bahdanau_attention.ipynb",
                                  "user01_Copy of 02_bahdanau_attention.ipynb", "smith_02.ipynb"])
def test_colab_and_lms_names_map_to_the_lesson(name):
    assert match_lesson(name, LESSONS)[0] == "02_bahdanau_attention"


@pytest.mark.parametrize("name, lesson", [("user42_Copy of 03_queries_keys_values.ipynb", "03_queries_keys_values"),
                                          ("user04_01_seq2seq_bottleneck.ipynb", "01_seq2seq_bottleneck"),
                                          ("user02_01_seq2seq_bottleneck (3).ipynb", "01_seq2seq_bottleneck"),
                                          ("s03_bahdanau_attention.ipynb", "02_bahdanau_attention")])
def test_digits_of_a_student_id_never_decide_the_lesson(name, lesson):
    assert match_lesson(name, LESSONS)[0] == lesson


@pytest.mark.parametrize("name", ["homework.ipynb", "04_masking.ipynb", "Untitled.ipynb", "user02_notes.ipynb"])
def test_unknown_names_match_no_lesson(name):
    assert match_lesson(name, LESSONS) == (None, "file name matches no lesson (01_seq2seq_bottleneck, "
                                                 "02_bahdanau_attention, 03_queries_keys_values)")


def test_a_name_that_fits_two_lessons_is_reported_not_guessed():
    assert match_lesson("lessons 01 and 02.ipynb", LESSONS) == (
        None, "file name fits several lessons by its number: 01_seq2seq_bottleneck, 02_bahdanau_attention")


@pytest.mark.parametrize("name, number", [("02_x.ipynb", 0), ("02_x (1).ipynb", 1), ("Copy of 02_x (12).ipynb", 12),
                                          ("02_x-2.ipynb", 2), ("user42.ipynb", 0), ("02_x(3).IPYNB", 3)])
def test_download_number(name, number):
    assert download_number(name) == number


def test_student_id_from_an_lms_folder_name_is_safe():
    assert student_id("Jane Doe_123_assignsubmission_file_") == "Jane_Doe_123_assignsubmission_file"
    assert student_id("../../etc") == "etc"


def test_student_id_keeps_letters_of_any_script_in_one_normal_form():
    assert student_id("José García") == "José_García"
    assert student_id(unicodedata.normalize("NFD", "José García")) == "José_García"
    assert student_id("张伟") == "张伟"


# ---------------------------------------------------------------- layouts

def test_one_folder_per_student(tmp_path):
    src = _tree(tmp_path / "in", ["alice/Copy of 01_seq2seq_bottleneck.ipynb", "bob/02_bahdanau_attention (1).ipynb"])
    got = collect(src, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck"), ("bob", "02_bahdanau_attention")]
    assert (tmp_path / "course/submitted/alice/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb").exists()
    assert got.problems == [] and got.skipped == []


def test_folders_every_file_shares_are_not_the_student(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("downloads/term 1/alice/01_seq2seq_bottleneck.ipynb", _nb()),
                                       ("downloads/term 1/bob/01_seq2seq_bottleneck.ipynb", _nb())])
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck"), ("bob", "01_seq2seq_bottleneck")]


def test_one_student_in_nbgrader_layout_is_that_student(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("alice/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb", _nb()),
                                       ("alice/02_bahdanau_attention/02_bahdanau_attention.ipynb", _nb())])
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck"), ("alice", "02_bahdanau_attention")]


def test_one_folder_per_lesson_holding_student_folders(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("01_seq2seq_bottleneck/alice/Copy of 01_seq2seq_bottleneck.ipynb", _nb()),
                                       ("02_bahdanau_attention/alice/02_bahdanau_attention.ipynb", _nb()),
                                       ("02_bahdanau_attention/bob/02_bahdanau_attention.ipynb", _nb())])
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck"), ("alice", "02_bahdanau_attention"),
                           ("bob", "02_bahdanau_attention")]


def test_nbgrader_layout_timestamps_decide_and_are_kept(tmp_path):
    """A zip of another course's submitted/ folder: each timestamp.txt is its notebook's time."""
    bundle = _zip(tmp_path / "d.zip", [
        ("submitted/ann/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb", _nb("late"), (2024, 1, 1, 0, 0, 0)),
        ("submitted/ann/01_seq2seq_bottleneck/timestamp.txt", "2024-03-05 10:00:00.000000 UTC"),
        ("old/ann/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb", _nb("early"), (2024, 5, 1, 0, 0, 0)),
        ("old/ann/01_seq2seq_bottleneck/timestamp.txt", "2024-03-01 10:00:00.000000 UTC")])
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert "late" in _submitted(course, "ann", "01_seq2seq_bottleneck")
    assert (course / "submitted/ann/01_seq2seq_bottleneck/timestamp.txt").read_text() == \
        "2024-03-05 10:00:00.000000 UTC"
    assert got.problems == [("old/ann/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb",
                             "older duplicate for ann/01_seq2seq_bottleneck: kept submitted/ann/01_seq2seq_bottleneck/"
                             "01_seq2seq_bottleneck.ipynb (newer: nbgrader timestamp.txt 2024-03-05 10:00:00.000000 "
                             "UTC, against nbgrader timestamp.txt 2024-03-01 10:00:00.000000 UTC)")]
    assert [r for r, _ in got.skipped] == ["old/ann/01_seq2seq_bottleneck/timestamp.txt",
                                           "submitted/ann/01_seq2seq_bottleneck/timestamp.txt"]


def test_exchange_layout_keeps_the_latest_submission_and_reports_the_older(tmp_path):
    src = _tree(tmp_path / "inbound", ["alice+01_seq2seq_bottleneck+2024-01-01 10:00:00/01_seq2seq_bottleneck.ipynb",
                                       "alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/01_seq2seq_bottleneck.ipynb",
                                       "alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/timestamp.txt"])
    got = collect(src, tmp_path / "course", LESSONS, **quiet)
    assert [p[0] for p in got.placed] == ["alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/01_seq2seq_bottleneck.ipynb"]
    assert got.problems == [("alice+01_seq2seq_bottleneck+2024-01-01 10:00:00/01_seq2seq_bottleneck.ipynb",
                             "older duplicate for alice/01_seq2seq_bottleneck: kept alice+01_seq2seq_bottleneck+"
                             "2024-01-02 10:00:00/01_seq2seq_bottleneck.ipynb (newer: exchange timestamp 2024-01-02 "
                             "10:00:00, against exchange timestamp 2024-01-01 10:00:00)")]
    assert got.skipped == [("alice+01_seq2seq_bottleneck+2024-01-02 10:00:00/timestamp.txt",
                            "nbgrader's exchange timestamp (the folder name holds the same time)")]
    stamp = tmp_path / "course/submitted/alice/01_seq2seq_bottleneck/timestamp.txt"
    assert stamp.read_text() == "2024-01-02 10:00:00"


def test_loose_files_are_matched_through_the_roster(tmp_path):
    src = _tree(tmp_path / "downloads", ["doejane_4711_01_seq2seq_bottleneck.ipynb", "Copy of 02_bahdanau_attention.ipynb"])
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,lms_id\njdoe,Jane Doe,4711\nbsmith,Bob Smith,4712\n")
    got = collect(src, tmp_path / "course", LESSONS, roster=roster, **quiet)
    assert _pairs(got) == [("jdoe", "01_seq2seq_bottleneck")]
    assert got.problems == [("Copy of 02_bahdanau_attention.ipynb",
                             "no roster student matches its folder or file name")]


def test_roster_ids_ending_in_digits_file_each_lesson_right(tmp_path):
    src = _tree(tmp_path / "downloads", ["user42_Copy of 03_queries_keys_values.ipynb",
                                         "user04_01_seq2seq_bottleneck.ipynb", "user4_02_bahdanau_attention.ipynb"])
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id\nuser42\nuser04\nuser4\n")
    got = collect(src, tmp_path / "course", LESSONS, roster=roster, **quiet)
    assert _pairs(got) == [("user04", "01_seq2seq_bottleneck"), ("user4", "02_bahdanau_attention"),
                           ("user42", "03_queries_keys_values")]
    assert got.problems == []


def test_a_student_twice_in_the_roster_is_one_student(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\njdoe,Jane Doe,\njdoe,,jane@uni.edu\n")
    assert read_roster(roster) == {"jdoe": dict(fields=["jdoe", "Jane Doe", "jdoe", "jane@uni.edu"],
                                                first_name=None, last_name=None, email="jane@uni.edu",
                                                lms_user_id=None)}
    src = _tree(tmp_path / "in", ["jane@uni.edu/01_seq2seq_bottleneck.ipynb"])
    got = collect(src, tmp_path / "course", LESSONS, roster=roster, **quiet)
    assert _pairs(got) == [("jdoe", "01_seq2seq_bottleneck")] and got.students == ["jdoe"]


def test_two_roster_ids_that_make_one_student_id_stop_collect(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id\nJane Doe\njane_doe\n")
    with pytest.raises(ValueError, match=r"'Jane Doe' \(line 2\) and 'jane_doe' \(line 3\) both make the student "
                                         r"id 'jane_doe'"):
        read_roster(roster)


def test_roster_values_that_identify_nobody_match_nobody(tmp_path):
    """A section 'A' or a name two students share never decides whose file it is."""
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,section\nx1,Li Wei,A\nx2,Li Wei,A\n")
    src = _tree(tmp_path / "in", ["Li Wei/01_seq2seq_bottleneck.ipynb", "a/01_seq2seq_bottleneck.ipynb",
                                  "x2 Li Wei/01_seq2seq_bottleneck.ipynb"])
    got = collect(src, tmp_path / "course", LESSONS, roster=roster, **quiet)
    assert _pairs(got) == [("x2", "01_seq2seq_bottleneck")]
    assert got.problems == [("Li Wei/01_seq2seq_bottleneck.ipynb", "no roster student matches its folder or file name"),
                            ("a/01_seq2seq_bottleneck.ipynb", "no roster student matches its folder or file name")]


# ---------------------------------------------------------------- duplicates

def test_zip_entry_times_decide_not_extraction_order(tmp_path, utc):
    """The older blank copy comes last in the zip: the newer complete one is still kept."""
    bundle = _zip(tmp_path / "d.zip", [
        ("alice/Copy of 02_bahdanau_attention.ipynb", _nb("complete"), (2024, 3, 2, 9, 30, 0)),
        ("alice/02_bahdanau_attention.ipynb", _nb("blank"), (2024, 3, 1, 8, 0, 0))])
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert "complete" in _submitted(course, "alice", "02_bahdanau_attention")
    assert got.problems == [("alice/02_bahdanau_attention.ipynb",
                             "older duplicate for alice/02_bahdanau_attention: kept alice/Copy of "
                             "02_bahdanau_attention.ipynb (newer: zip entry time 2024-03-02 09:30:00 UTC, against "
                             "zip entry time 2024-03-01 08:00:00 UTC)")]
    assert got.notes == ["alice/02_bahdanau_attention: kept alice/Copy of 02_bahdanau_attention.ipynb over "
                         "alice/02_bahdanau_attention.ipynb: newer: zip entry time 2024-03-02 09:30:00 UTC, "
                         "against zip entry time 2024-03-01 08:00:00 UTC"]
    assert (course / "submitted/alice/02_bahdanau_attention/timestamp.txt").read_text() == \
        "2024-03-02 09:30:00.000000 UTC"


def test_the_utc_time_field_of_a_zip_entry_is_used(tmp_path):
    bundle = tmp_path / "d.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr(_utc_zip_info("bob/01_seq2seq_bottleneck (1).ipynb", 1_700_000_000), _nb("newer"))
        z.writestr(_utc_zip_info("bob/01_seq2seq_bottleneck (2).ipynb", 1_600_000_000), _nb("older"))
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert "newer" in _submitted(course, "bob", "01_seq2seq_bottleneck")
    assert got.problems == [("bob/01_seq2seq_bottleneck (2).ipynb",
                             "older duplicate for bob/01_seq2seq_bottleneck: kept bob/01_seq2seq_bottleneck (1).ipynb "
                             "(newer: zip entry time (UTC) 2023-11-14 22:13:20 UTC, against zip entry time (UTC) "
                             "2020-09-13 12:26:40 UTC)")]


def test_same_zip_time_the_highest_download_number_wins(tmp_path):
    """An LMS zip stamps every entry with one time: the browser's numbering tells the order."""
    bundle = _zip(tmp_path / "d.zip", [("carol/02_bahdanau_attention (2).ipynb", _nb("third")),
                                       ("carol/02_bahdanau_attention.ipynb", _nb("first")),
                                       ("carol/02_bahdanau_attention (1).ipynb", _nb("second"))])
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert "third" in _submitted(course, "carol", "02_bahdanau_attention")
    kept = "kept carol/02_bahdanau_attention (2).ipynb (same time; a later download:"
    assert got.problems == [
        ("carol/02_bahdanau_attention (1).ipynb",
         f"older duplicate for carol/02_bahdanau_attention: {kept} (2), against (1))"),
        ("carol/02_bahdanau_attention.ipynb",
         f"older duplicate for carol/02_bahdanau_attention: {kept} (2), against no number)")]


def test_identical_copies_keep_one_and_say_so(tmp_path):
    same = _nb("same")
    bundle = _zip(tmp_path / "d.zip", [("dan/01_seq2seq_bottleneck.ipynb", same),
                                       ("dan/Copy of 01_seq2seq_bottleneck.ipynb", same)])
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert got.problems == [("dan/01_seq2seq_bottleneck.ipynb", "older duplicate for dan/01_seq2seq_bottleneck: kept "
                             "dan/Copy of 01_seq2seq_bottleneck.ipynb (an identical copy)")]


def test_copies_that_cannot_be_ordered_are_reported_for_a_check_by_hand(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("eve/01_seq2seq_bottleneck.ipynb", _nb("one")),
                                       ("eve/Copy of 01_seq2seq_bottleneck.ipynb", _nb("two"))])
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert got.problems == [("eve/01_seq2seq_bottleneck.ipynb", "older duplicate for eve/01_seq2seq_bottleneck: kept "
                             "eve/Copy of 01_seq2seq_bottleneck.ipynb (CANNOT TELL which is newer (same time, same "
                             "download number): kept the one last in name order; check by hand)")]


# ---------------------------------------------------------------- never merge two people

def test_folder_names_that_make_one_id_are_two_students(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("student a/01_seq2seq_bottleneck.ipynb", _nb("A space")),
                                       ("student_a/01_seq2seq_bottleneck.ipynb", _nb("A underscore")),
                                       ("Student_A/01_seq2seq_bottleneck.ipynb", _nb("A capital"))])
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert _pairs(got) == [("Student_A", "01_seq2seq_bottleneck"), ("student_a_2", "01_seq2seq_bottleneck"),
                           ("student_a_3", "01_seq2seq_bottleneck")]
    assert "A capital" in _submitted(course, "Student_A", "01_seq2seq_bottleneck")
    assert "A underscore" in _submitted(course, "student_a_2", "01_seq2seq_bottleneck")
    assert "A space" in _submitted(course, "student_a_3", "01_seq2seq_bottleneck")
    assert got.collisions == ["student id collision: 'Student_A', 'student_a', 'student a' make the same student id "
                         "(ignoring case); kept apart as Student_A, student_a_2, student_a_3: rename the folders "
                         "or use --roster to choose the ids"]
    assert got.problems == []


def test_unicode_names_in_a_zip_without_the_utf8_flag_and_in_both_normal_forms(tmp_path):
    class Utf8WithoutFlag(zipfile.ZipInfo):  # what many zip tools write
        def _encodeFilenameFlags(self):
            return self.filename.encode("cp437"), self.flag_bits

    def raw(name):
        return Utf8WithoutFlag(name.encode("utf-8").decode("cp437"), date_time=(2024, 3, 1, 12, 0, 0))

    bundle = tmp_path / "d.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr(raw("José/01_seq2seq_bottleneck.ipynb"), _nb())
        z.writestr(unicodedata.normalize("NFD", "José") + "/02_bahdanau_attention.ipynb", _nb())
        z.writestr("张伟/01_seq2seq_bottleneck.ipynb", _nb())
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("José", "01_seq2seq_bottleneck"), ("José", "02_bahdanau_attention"),
                           ("张伟", "01_seq2seq_bottleneck")]
    assert got.collisions == [] and got.problems == []


def test_upper_case_names_are_collected(tmp_path):
    src = _tree(tmp_path / "in", ["ALICE/COPY OF 01_SEQ2SEQ_BOTTLENECK (1).IPYNB"])
    got = collect(src, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("ALICE", "01_seq2seq_bottleneck")]
    assert (tmp_path / "course/submitted/ALICE/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb").exists()


# ---------------------------------------------------------------- every file accounted for

def test_zips_inside_the_zip_are_opened(tmp_path):
    inner = tmp_path / "work.zip"
    _zip(inner, [("02_bahdanau_attention.ipynb", _nb("from the inner zip"))])
    carol = tmp_path / "carol.zip"
    _zip(carol, [("01_seq2seq_bottleneck.ipynb", _nb())])
    bundle = _zip(tmp_path / "d.zip", [("bob/work.zip", inner.read_bytes()), ("carol.zip", carol.read_bytes()),
                                       ("dan/broken.zip", "not a zip")])
    course = tmp_path / "course"
    got = collect(bundle, course, LESSONS, **quiet)
    assert _pairs(got) == [("bob", "02_bahdanau_attention"), ("carol", "01_seq2seq_bottleneck")]
    assert "from the inner zip" in _submitted(course, "bob", "02_bahdanau_attention")
    assert got.problems == [("dan/broken.zip", "a .zip that cannot be read: File is not a zip file")]


def test_every_file_is_placed_or_listed_with_the_reason(tmp_path):
    entries = [("alice/01_seq2seq_bottleneck.ipynb", _nb()),
               ("alice/notes.txt", "not a notebook"),
               ("alice/01_seq2seq_bottleneck.html", "<html>"),
               ("bob/Untitled.ipynb", _nb()),
               ("bob/04_masking.ipynb", _nb()),
               ("loose_01_seq2seq_bottleneck.ipynb", _nb()),
               ("__MACOSX/alice/._01_seq2seq_bottleneck.ipynb", "resource fork"),
               ("alice/._01_seq2seq_bottleneck.ipynb", "resource fork"),
               ("alice/.DS_Store", "settings"),
               ("alice/.ipynb_checkpoints/01_seq2seq_bottleneck-checkpoint.ipynb", _nb())]
    bundle = _zip(tmp_path / "downloads.zip", entries)
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck")]
    no_lesson = "file name matches no lesson (01_seq2seq_bottleneck, 02_bahdanau_attention, 03_queries_keys_values)"
    assert got.problems == [("alice/01_seq2seq_bottleneck.html", "not a notebook (.ipynb)"),
                            ("alice/notes.txt", "not a notebook (.ipynb)"),
                            ("loose_01_seq2seq_bottleneck.ipynb",
                             "a loose file: put it in a folder named after the student, or give --roster"),
                            ("bob/04_masking.ipynb", f"{no_lesson}; student bob"),
                            ("bob/Untitled.ipynb", f"{no_lesson}; student bob")]
    assert got.skipped == [("__MACOSX/alice/._01_seq2seq_bottleneck.ipynb", "macOS archive metadata (__MACOSX/)"),
                           ("alice/.DS_Store", "macOS folder settings"),
                           ("alice/._01_seq2seq_bottleneck.ipynb", "macOS resource fork (._ file)"),
                           ("alice/.ipynb_checkpoints/01_seq2seq_bottleneck-checkpoint.ipynb",
                            "Jupyter's autosave checkpoint (the notebook itself is collected)")]
    accounted = [p[0] for p in got.placed] + [p[0] for p in got.problems] + [p[0] for p in got.skipped]
    assert sorted(accounted) == sorted(name for name, _ in entries)
    assert got.students == ["alice", "bob"]


# ---------------------------------------------------------------- re-runs and the gradebook

def test_running_collect_twice_changes_nothing(tmp_path):
    bundle = _zip(tmp_path / "d.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb("v1")),
                                       ("alice/01_seq2seq_bottleneck (1).ipynb", _nb("v2")),
                                       ("bob/notes.txt", "x")])
    course = tmp_path / "course"
    first = collect(bundle, course, LESSONS, **quiet)
    target = course / "submitted/alice/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb"
    stat, manifest = target.stat(), (course / "collect.json").read_text()
    second = collect(bundle, course, LESSONS, **quiet)
    assert second == first
    assert target.stat().st_mtime_ns == stat.st_mtime_ns and "v2" in target.read_text()
    assert (course / "collect.json").read_text() == manifest
    assert sorted(p.relative_to(course).as_posix() for p in (course / "submitted").rglob("*") if p.is_file()) == [
        "submitted/alice/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb",
        "submitted/alice/01_seq2seq_bottleneck/timestamp.txt"]


def test_a_later_batch_replaces_only_older_copies(tmp_path):
    course = tmp_path / "course"
    collect(_zip(tmp_path / "first.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb("march 2"), (2024, 3, 2, 0, 0, 0))]),
            course, LESSONS, **quiet)
    older = collect(_zip(tmp_path / "old.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb("march 1"),
                                                 (2024, 3, 1, 0, 0, 0))]), course, LESSONS, **quiet)
    assert older.placed == [] and len(older.problems) == 1
    assert older.problems[0][1].startswith("older than the copy already in submitted/alice/01_seq2seq_bottleneck/ (from ")
    assert "march 2" in _submitted(course, "alice", "01_seq2seq_bottleneck")
    newer = collect(_zip(tmp_path / "new.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb("march 3"),
                                                 (2024, 3, 3, 0, 0, 0))]), course, LESSONS, **quiet)
    assert _pairs(newer) == [("alice", "01_seq2seq_bottleneck")] and newer.problems == []
    assert "march 3" in _submitted(course, "alice", "01_seq2seq_bottleneck")


def test_export_has_a_row_per_lesson_for_every_student_or_a_listed_reason(tmp_path):
    """Students whose files were not placed still get a row (0 points) in every lesson, and the reason."""
    from nbgrader.api import Gradebook
    from autograder.export import export
    course = tmp_path / "course"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lesson in LESSONS:
            gb.update_or_create_assignment(lesson)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,first_name,last_name,email\nann,Ann,Lee,ann@uni.edu\nben,Ben,Ode,\ncid,Cid,Roe,\n")
    bundle = _zip(tmp_path / "d.zip", [("ann/01_seq2seq_bottleneck.ipynb", _nb()), ("ben/homework.ipynb", _nb()),
                                       ("stray/02_bahdanau_attention.ipynb", _nb())])
    collect(bundle, course, LESSONS, roster=roster, **quiet)
    grades, summary = export(course, tmp_path / "export", **quiet)
    with open(grades) as f:
        rows = [(r["student_id"], r["assignment"]) for r in csv.DictReader(f)]
    assert sorted(rows) == sorted((s, l) for s in ["ann", "ben", "cid"] for l in LESSONS)
    text = summary.read_text()
    assert "## Files collect did not place (2)" in text
    assert f"- `ben/homework.ipynb` (in {bundle.resolve()}): `file name matches no lesson" in text
    assert f"- `stray/02_bahdanau_attention.ipynb` (in {bundle.resolve()}): `no roster student matches" in text
    manifest = json.loads((course / "collect.json").read_text())
    assert manifest["placed"]["ann/01_seq2seq_bottleneck"]["source"] == f"{bundle}:ann/01_seq2seq_bottleneck.ipynb"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        ann = gb.find_student("ann")
        assert (ann.first_name, ann.last_name, ann.email) == ("Ann", "Lee", "ann@uni.edu")


def test_a_canvas_gradebook_export_works_as_a_roster(tmp_path):
    roster = tmp_path / "canvas.csv"
    roster.write_text('Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1\n'
                      '    Points Possible,,,,,10\n'
                      '"Doe, Jane",4711,S123,jdoe,Section A,9\n')
    assert read_roster(roster) == {"jdoe": dict(fields=["Doe, Jane", "4711", "S123", "jdoe", "Section A", "9"],
                                                first_name="Jane", last_name="Doe", email=None, lms_user_id="4711")}


def test_the_command_exits_2_on_a_collision_or_a_file_not_placed_and_0_otherwise(tmp_path, capsys):
    from autograder.__main__ import main
    course = tmp_path / "course"
    clean = _zip(tmp_path / "clean.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb())])
    collision = _zip(tmp_path / "collision.zip", [("student a/01_seq2seq_bottleneck.ipynb", _nb()),
                                                  ("student_a/01_seq2seq_bottleneck.ipynb", _nb())])
    stray = _zip(tmp_path / "stray.zip", [("alice/notes.txt", "x")])
    assert [main(["collect", str(z), "--course", str(course)]) for z in (clean, collision, stray)] == [0, 2, 2]
    assert "NOTE student id collision: 'student_a', 'student a'" in capsys.readouterr().out


# ---------------------------------------------------------------- files that are not what they seem

def test_links_pipes_and_devices_are_never_followed_or_read_and_each_is_listed(tmp_path):
    """An exchange submission that is a symbolic link into the course's solutions scores nothing and shows nothing."""
    import os
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "01_seq2seq_bottleneck.ipynb").write_text(_nb("THE SOLUTIONS"))
    inbound = tmp_path / "inbound"
    alice = inbound / "alice+01_seq2seq_bottleneck+2024-01-01 10:00:00"
    alice.mkdir(parents=True)
    (alice / "01_seq2seq_bottleneck.ipynb").symlink_to(solutions / "01_seq2seq_bottleneck.ipynb")
    (inbound / "bob+01_seq2seq_bottleneck+2024-01-01 10:00:00").symlink_to(solutions, target_is_directory=True)
    carol = inbound / "carol+01_seq2seq_bottleneck+2024-01-01 10:00:00"
    carol.mkdir()
    (carol / "01_seq2seq_bottleneck.ipynb").write_text(_nb("carol's own"))
    (carol / "02_bahdanau_attention.ipynb").symlink_to(carol / "01_seq2seq_bottleneck.ipynb")  # inside the tree
    os.mkfifo(carol / "notes.ipynb")  # opening it would block collect forever
    expected = [("alice+01_seq2seq_bottleneck+2024-01-01 10:00:00/01_seq2seq_bottleneck.ipynb",
                 f"a symbolic link (to {solutions}/01_seq2seq_bottleneck.ipynb): never followed or read"),
                ("bob+01_seq2seq_bottleneck+2024-01-01 10:00:00", f"a symbolic link (to {solutions}): never "
                                                                   f"followed or read"),
                ("carol+01_seq2seq_bottleneck+2024-01-01 10:00:00/02_bahdanau_attention.ipynb",
                 f"a symbolic link (to {carol}/01_seq2seq_bottleneck.ipynb): never followed or read"),
                ("carol+01_seq2seq_bottleneck+2024-01-01 10:00:00/notes.ipynb",
                 "a named pipe (fifo): never followed or read")]
    try:
        os.mknod(carol / "disk.ipynb", 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        expected.insert(2, ("carol+01_seq2seq_bottleneck+2024-01-01 10:00:00/disk.ipynb",
                            "a character device: never followed or read"))
    except PermissionError:
        pass  # not root: the device case is left out
    course = tmp_path / "course"
    got = collect(inbound, course, LESSONS, **quiet)
    assert _pairs(got) == [("carol", "01_seq2seq_bottleneck")]
    assert sorted(got.skipped) == sorted(expected)
    assert got.problems == []
    placed = "".join(p.read_text() for p in (course / "submitted").rglob("*.ipynb"))
    assert "THE SOLUTIONS" not in placed and "carol's own" in placed
    from autograder.collect import not_placed_summary
    summary = "\n".join(not_placed_summary(course))
    assert f"## Links, pipes and devices collect never opened ({len(expected)})" in summary
    assert f"- `alice+01_seq2seq_bottleneck+2024-01-01 10:00:00/01_seq2seq_bottleneck.ipynb` (in {inbound}): `a " \
           f"symbolic link (to {solutions}/01_seq2seq_bottleneck.ipynb): never followed or read`" in summary


def test_a_file_swapped_for_a_link_after_the_walk_is_not_read(tmp_path):
    import contextlib
    from autograder.collect import read_collection
    src = _tree(tmp_path / "in", ["alice/01_seq2seq_bottleneck.ipynb"])
    secret = tmp_path / "secret.ipynb"
    secret.write_text("SECRET")
    with contextlib.ExitStack() as stack:
        (entry,), problems, skipped = read_collection(src, stack)
        notebook = src / "alice/01_seq2seq_bottleneck.ipynb"
        notebook.unlink()
        notebook.symlink_to(secret)
        with pytest.raises(OSError):
            entry.open()
        (src / "alice").rename(tmp_path / "elsewhere")
        (src / "alice").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
        with pytest.raises(OSError):  # a folder on the way swapped for a link: not followed either
            entry.open()


def test_a_symbolic_link_stored_in_a_zip_is_refused(tmp_path):
    bundle = tmp_path / "d.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        link = zipfile.ZipInfo("alice/01_seq2seq_bottleneck.ipynb", date_time=(2024, 3, 1, 12, 0, 0))
        link.create_system = 3
        link.external_attr = (0o120777 << 16)  # S_IFLNK: the entry's text is the link's target
        z.writestr(link, "../../../../course/source/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb")
        z.writestr("bob/01_seq2seq_bottleneck.ipynb", _nb())
    got = collect(bundle, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("bob", "01_seq2seq_bottleneck")]
    assert got.skipped == [("alice/01_seq2seq_bottleneck.ipynb", "a symbolic link in the zip: never followed or read")]


def _zeros(z, name, megabytes):
    with z.open(name, "w", force_zip64=True) as f:
        for _ in range(megabytes):
            f.write(bytes(1 << 20))


def test_a_zip_of_zeros_is_streamed_in_bounded_memory_and_what_is_over_a_cap_is_listed(tmp_path):
    import tracemalloc
    inner = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        _zeros(z, "02_bahdanau_attention.ipynb", 150)
    bundle = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        _zeros(z, "alice/01_seq2seq_bottleneck.ipynb", 150)
        _zeros(z, "bob/01_seq2seq_bottleneck.ipynb", 90)
        z.write(inner, "carol/work.zip")
    assert bundle.stat().st_size < 2_500_000  # about 2 MB on disk, 390 MB inside
    course = tmp_path / "course"
    tracemalloc.start()
    try:
        got = collect(bundle, course, LESSONS, **quiet)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"collect's peak of Python memory on a {bundle.stat().st_size / 2**20:.1f} MB zip of 390 MB of zeros: "
          f"{peak / 2**20:.1f} MB")
    assert peak < 40 * 2**20, f"collect held {peak / 2**20:.0f} MB at its peak"
    assert _pairs(got) == [("bob", "01_seq2seq_bottleneck")]  # 90 MB: under the cap, streamed to disk
    assert (course / "submitted/bob/01_seq2seq_bottleneck/01_seq2seq_bottleneck.ipynb").stat().st_size == 90 << 20
    assert got.problems == [("alice/01_seq2seq_bottleneck.ipynb", "a notebook of 150 MB: larger than any "
                                                                  "submission (at most 100 MB are read)"),
                            ("carol/work/02_bahdanau_attention.ipynb", "a notebook of 150 MB: larger than any "
                                                                       "submission (at most 100 MB are read)")]


def test_caps_on_an_archive_s_entries_and_uncompressed_bytes_list_what_they_leave_out(tmp_path, monkeypatch):
    from autograder.collect import limits as module
    many = _zip(tmp_path / "many.zip", [(f"s{i}/01_seq2seq_bottleneck.ipynb", _nb()) for i in range(12)])
    monkeypatch.setattr(module, "MAX_ENTRIES", 10)
    got = collect(many, tmp_path / "course", LESSONS, **quiet)
    assert got.placed == [] and got.problems == [
        ("many.zip", "a zip of 12 entries, more than the 10 collect reads from one archive: not read (unzip it, "
                     "or split it)")]
    monkeypatch.setattr(module, "MAX_ENTRIES", 50_000)
    monkeypatch.setattr(module, "MAX_ARCHIVE_BYTES", 2 << 20)
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as z:
        for student in ("ann", "ben", "cid"):
            _zeros(z, f"{student}/01_seq2seq_bottleneck.ipynb", 1)
    got = collect(big, tmp_path / "course", LESSONS, **quiet)
    assert _pairs(got) == [("ann", "01_seq2seq_bottleneck"), ("ben", "01_seq2seq_bottleneck")]
    assert got.problems == [("cid/01_seq2seq_bottleneck.ipynb", "not read: its zip holds more than 2 MB uncompressed "
                                                                "(unzip it and collect the folder)")]


# ---------------------------------------------------------------- odd names and state that survives a crash

def test_names_that_are_not_utf8_hold_a_newline_or_differ_only_in_case_are_placed_or_listed(tmp_path):
    import os
    src = tmp_path / "in"
    src.mkdir()
    for raw in (b"caf\xe9", b"line\nbreak", b"Bob", b"bob"):
        os.makedirs(os.path.join(os.fsencode(src), raw))
        with open(os.path.join(os.fsencode(src), raw, b"01_seq2seq_bottleneck.ipynb"), "w") as f:
            f.write(_nb(raw.decode("latin-1")))
    with open(os.path.join(os.fsencode(src), b"Bob", b"notes\xff.txt"), "w") as f:
        f.write("x")
    (src / "Bob" / "01_SEQ2SEQ_BOTTLENECK.ipynb").write_text(_nb("a case twin"))
    course = tmp_path / "course"
    lines = []
    got = collect(src, course, LESSONS, log=lines.append)
    assert _pairs(got) == [("Bob", "01_seq2seq_bottleneck"), ("bob_2", "01_seq2seq_bottleneck"),
                           ("caf", "01_seq2seq_bottleneck"), ("line_break", "01_seq2seq_bottleneck")]
    assert got.problems[0] == ("Bob/notes\\xff.txt", "not a notebook (.ipynb)")
    (twin, why), = got.problems[1:]  # of two names that differ only in case, one is placed, the other listed
    assert twin in ("Bob/01_SEQ2SEQ_BOTTLENECK.ipynb", "Bob/01_seq2seq_bottleneck.ipynb")
    assert why.startswith("older duplicate for Bob/01_seq2seq_bottleneck: kept Bob/01_")
    assert "'Bob', 'bob' make the same student id" in got.collisions[0]
    assert "the folder name 'caf\\xe9' is not plain text (bytes that are not UTF-8, or a line break): placed as " \
           "student caf" in got.notes
    assert "the folder name 'line\\nbreak' is not plain text (bytes that are not UTF-8, or a line break): placed " \
           "as student line_break" in got.notes
    "\n".join(lines).encode("utf-8")  # every line printable
    run = next(iter(json.loads((course / "collect.json").read_text(encoding="utf-8"))["runs"].values()))
    assert run["raw_names"] == {"caf\\xe9/01_seq2seq_bottleneck.ipynb": b"caf\xe9/01_seq2seq_bottleneck.ipynb".hex(),
                                "line\\nbreak/01_seq2seq_bottleneck.ipynb": b"line\nbreak/01_seq2seq_bottleneck.ipynb".hex(),
                                "Bob/notes\\xff.txt": b"Bob/notes\xff.txt".hex()}
    assert collect(src, course, LESSONS, **quiet) == got  # and again: nothing changes


def test_a_crash_while_writing_collect_json_leaves_the_old_one_and_the_next_collect_and_export_work(tmp_path,
                                                                                                   monkeypatch):
    from autograder.collect import place as module
    from autograder.export import export
    course = tmp_path / "course"
    collect(_zip(tmp_path / "one.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb())]), course, LESSONS, **quiet)
    before = (course / "collect.json").read_bytes()

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    two = _zip(tmp_path / "two.zip", [("bob/01_seq2seq_bottleneck.ipynb", _nb()), ("bob/x.txt", "x")])
    monkeypatch.setattr(module.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        collect(two, course, LESSONS, **quiet)
    monkeypatch.undo()
    assert (course / "collect.json").read_bytes() == before
    assert sorted(p.name for p in course.iterdir() if p.name.startswith(".")) == []  # no partial file left
    assert not list((course / "submitted").rglob(".*partial"))
    got = collect(two, course, LESSONS, **quiet)
    assert _pairs(got) == [("bob", "01_seq2seq_bottleneck")]
    assert len(json.loads((course / "collect.json").read_text())["runs"]) == 2
    _, summary = export(course, tmp_path / "export", **quiet)
    assert "`bob/x.txt`" in summary.read_text()


def test_an_unreadable_collect_json_is_kept_aside_and_collect_goes_on(tmp_path):
    course = tmp_path / "course"
    (course / "collect.json").write_text("")  # what an older collect left when it crashed mid-write
    got = collect(_zip(tmp_path / "d.zip", [("alice/01_seq2seq_bottleneck.ipynb", _nb())]), course, LESSONS, **quiet)
    assert _pairs(got) == [("alice", "01_seq2seq_bottleneck")]
    aside = [p.name for p in course.glob("collect.json.unreadable-*")]
    assert len(aside) == 1 and any(aside[0] in note for note in got.notes)
    assert json.loads((course / "collect.json").read_text())["placed"]
