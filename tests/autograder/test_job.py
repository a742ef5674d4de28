"""The job protocol between a grading worker and the parent (autograder/job.py): events are records
with a kind, kernel-chosen words cannot forge or hide one, and the parent flags by kind."""
import json

import pytest

from autograder import job
from autograder.job import as_flag as flag_for


@pytest.fixture
def events(tmp_path, monkeypatch):
    path = tmp_path / "events.txt"
    monkeypatch.setenv(job.EVENTS_ENV, str(path))
    return path


def test_kernel_text_with_a_newline_cannot_forge_a_second_event(events):
    message = 'ValueError raised\nhang: cell 3 never started\n{"kind": "hang", "text": "x"}'
    job.event("grader", f"the grader could not run test cell t ({message})")
    found = job.read_events(events)
    assert [e.kind for e in found] == ["grader"] and len(events.read_text().splitlines()) == 1
    assert "\n" not in found[0] and "hang: cell 3" in found[0]       # quoted, on one line, harmless


def test_event_text_is_stripped_of_control_characters_and_capped(events):
    job.event("integrity", "np.allclose: \x1b[31mred\x00\u2028" + "x" * 2000)
    (found,) = job.read_events(events)
    assert found.text.startswith("np.allclose: ") and "red" in found.text and len(found.text) == job.MAX_EVENT_CHARS
    assert not any(ord(c) < 32 or c == "\u2028" for c in found)


def test_an_unknown_kind_is_refused_and_a_malformed_line_is_skipped(events):
    with pytest.raises(ValueError, match="unknown event kind"):
        job.event("hang:", "cell 1")
    events.write_text("hang: an old-style line\n" + json.dumps({"kind": "nonsense", "text": "x"}) + "\n"
                      + json.dumps({"kind": "timeout", "text": "cell 2 timed out"}) + "\n")
    assert [(e.kind, e.text) for e in job.read_events(events)] == [("timeout", "cell 2 timed out")]


def test_the_parent_flags_by_kind_and_a_grader_side_failure_is_flagged_for_review(events):
    job.event("grader", "the grader could not run test cell test_softmax (no readable answer)")
    job.event("runtime", "the kernel died in cell 7 (os._exit, a crash, or a resource limit)")
    job.event("timeout", "cell 4 timed out after 30 s")
    job.event("integrity", "np.allclose was replaced")
    flags = [flag_for(e) for e in job.read_events(events) if e.kind in job.FLAGGED]
    assert flags == ["grader: the grader could not run test cell test_softmax (no readable answer)",
                     "runtime: the kernel died in cell 7 (os._exit, a crash, or a resource limit) (later cells not run)",
                     "integrity: np.allclose was replaced"]


def test_a_submission_with_more_pending_cells_than_a_grader_fault_explains_is_flagged():
    assert job.pending_flags(["test_a"] * job.MAX_PENDING) == []
    (flag,) = job.pending_flags(["test_a", "test_b", "test_c", "test_d"][:job.MAX_PENDING + 1])
    assert flag.kind == "pending" and "test_a" in flag.text and flag.kind in job.FLAG_KINDS


def test_a_finding_survives_pickling_and_its_record_with_its_kind_and_cell():
    """An outcome carries its findings back from a Dask worker, pickled; a report holds them as records."""
    import pickle
    found = job.Finding("grader", "the grader could not run test cell t", "t")
    for back in (pickle.loads(pickle.dumps(found)), job.Finding.from_record(json.loads(json.dumps(found.record())))):
        assert type(back) is job.Finding and (back.kind, back.text, back.cell) == ("grader", found.text, "t")
        assert back == "grader: the grader could not run test cell t"


def test_a_report_is_read_back_as_findings_and_what_is_not_a_finding_is_dropped():
    records = [{"kind": "patch", "text": "line 2 changes np.allclose (numpy)", "cell": None},
               "structure: test cell t was deleted (it scores zero)",  # a report written before findings were records
               {"kind": "x", "text": 3}, ["kind", "text"], {"kind": "eq", "text": "y", "cell": 7}]
    assert [(f.kind, f.text) for f in job.findings(records)] == [
        ("patch", "line 2 changes np.allclose (numpy)"), ("structure", "test cell t was deleted (it scores zero)")]
    assert job.findings("not a list") == []


def test_job_json_holds_each_limit_once_and_the_worker_gives_the_launcher_what_the_parent_probed(tmp_path):
    from autograder.course import submission_paths
    from autograder.run import grading, worker
    from autograder.sandbox import sandbox_settings
    from autograder.sandbox.limits import Limits
    limits = Limits(memory_mb=123457, nproc=8643, fsize_mb=9, notebook_timeout=45, integrity_timeout=97531)
    settings = {**sandbox_settings(tmp_path, limits), "bwrap": False}  # as a probe may return it
    text = grading.job_record(submission_paths(tmp_path, "01_x", "alice"), "sqlite:///g.db", limits, settings).to_json()
    for value in ("123457", "8643", "97531"):
        assert text.count(value) == 1, f"{value} appears {text.count(value)} times in job.json: {text}"
    record = job.Job.from_json(text)
    assert record.limits["memory_mb"] == 123457 and json.loads(text)["sandbox"]["bwrap"] is False
    assert worker.launcher_settings(record) == settings
