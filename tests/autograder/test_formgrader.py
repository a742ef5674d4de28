"""The instructor's review desk: nbgrader's formgrader in JupyterLab, driven in headless Chromium.

A class of two is collected and graded with `python -m autograder` (alice: every answer
right; bob: nothing done, and a line that gets him flagged). JupyterLab is then started the
way the README says: from a folder whose nbgrader_config.py is the repository's (here
through AUTOGRADER_COURSE, for a temporary course). In Chromium: the Nbgrader menu opens
formgrader; it lists the lesson and both students with their autograded scores and shows
the flags; bob's submission opens; a score is overridden and a comment added, and both
survive a reload. Then `python -m autograder export` has the override (nbgrader's CSV,
canvas.csv, moodle.csv), summary.md says where to open the flagged submission, and
`python -m autograder feedback` shows bob the comment. No console errors; MathJax comes
from the Jupyter server, not a CDN. Screenshots: test-artifacts/browser/formgrader_*.png.

Needs /usr/bin/chromium and playwright, like tests/site/test_browser.py.
"""
import csv
import json
import os
import subprocess
import sys
import zipfile

import nbformat
import pytest

from tests import browser as b
from tests.nbtools import REPO, SOLUTIONS, fill_solutions, grade_id, is_solution, is_test, load

_missing = b.missing_prerequisite()
if _missing and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"browser tests cannot run under COURSE_CI=1: {_missing}")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"browser tests skipped: {_missing}")

LESSON = "04_masking"
OVERRIDE = 2  # points the instructor gives bob's first test cell by hand
COMMENT = "Your padding mask is missing: see section 2 and try again."


def _autograder(*args):
    done = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"python -m autograder {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A released lesson, two submissions collected from a zip and graded by `python -m autograder grade`."""
    from autograder.course import release
    root = tmp_path_factory.mktemp("review")
    course = root / "course"
    release(course, [LESSON], notebooks=None, log=lambda *_: None)
    student = load(course / "release" / LESSON / f"{LESSON}.ipynb")
    alice = fill_solutions(student, load(SOLUTIONS / f"{LESSON}.ipynb"))
    bob = nbformat.reads(nbformat.writes(student), as_version=4)
    bob.cells.append(nbformat.v4.new_code_cell('where = "the gradebook"'))  # names a grader file: flagged
    with zipfile.ZipFile(root / "downloads.zip", "w") as z:
        z.writestr(f"alice/{LESSON}.ipynb", nbformat.writes(alice))
        z.writestr(f"bob/Copy of {LESSON}.ipynb", nbformat.writes(bob))
    _autograder("collect", str(root / "downloads.zip"), "--course", str(course))
    _autograder("grade", LESSON, "--jobs", "2", "--course", str(course))
    # the folder jupyter lab serves: its nbgrader_config.py is the repository's
    (root / "nbgrader_config.py").write_text(f"c = get_config()\nload_subconfig({str(REPO / 'nbgrader_config.py')!r})\n")
    return course


@pytest.fixture(scope="module")
def lab(course, tmp_path_factory):
    b.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    work = tmp_path_factory.mktemp("lab")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOGRADER_COURSE", str(course))
        with b.jupyter_server("lab", course.parent, work, b.ARTIFACTS / "formgrader-server.log") as server:
            yield server


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with b.browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


def _flagged(course):
    reports = [json.loads(p.read_text()) for p in (course / "reports" / LESSON).glob("*.json")]
    return {r["student"] for r in reports if r["flags"]}


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_review_a_flagged_submission_in_formgrader(course, lab, chromium):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    source = load(course / "source" / LESSON / f"{LESSON}.ipynb")
    first_test = next(grade_id(c) for c in source.cells if is_test(c))
    first_answer = next(grade_id(c) for c in source.cells if is_solution(c))
    max_score = sum(c.metadata["nbgrader"]["points"] for c in source.cells if is_test(c))
    assert "bob" in _flagged(course)
    def shot(page, name, full_page=True):
        page.screenshot(path=str(b.ARTIFACTS / f"formgrader_{name}.png"), full_page=full_page)


    page = chromium.new_page()
    console = b.ConsoleLog(page)
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(f"http://127.0.0.1:{lab.port}/")
            and not r.url.startswith("data:") else None)
    try:
        # JupyterLab, as the instructor opens it; its Nbgrader menu opens formgrader in a tab
        page.goto(lab.url("lab"))
        page.get_by_role("menuitem", name="Nbgrader", exact=True).click(timeout=180_000)
        page.get_by_role("menuitem", name="Formgrader", exact=True).click()
        frame = page.frame_locator("iframe[src*='formgrader']")
        frame.get_by_text(LESSON, exact=True).first.wait_for(timeout=60_000)
        shot(page, "1_lab")

        # every lesson, with its submissions
        page.goto(f"http://127.0.0.1:{lab.port}/formgrader/manage_assignments")
        row = page.locator("tr", has_text=LESSON).first
        row.wait_for(timeout=60_000)
        assert row.locator("td").nth(8).inner_text().strip() == "2"  # the "# Submissions" column

        # every student, with the autograded score
        page.goto(f"http://127.0.0.1:{lab.port}/formgrader/manage_students")
        page.locator("tr", has_text="alice").first.wait_for(timeout=60_000)
        shot(page, "2_students")
        for student, score in (("alice", max_score), ("bob", 0)):
            cells = [t.strip() for t in page.locator("tr", has_text=student).first.locator("td").all_inner_texts()]
            assert f"{score:g} / {max_score:g}" in cells, (student, cells)

        # the lesson's submissions: scores, flags
        page.goto(f"http://127.0.0.1:{lab.port}/formgrader/gradebook/{LESSON}/{LESSON}")
        page.locator("td.name a.name-hidden").first.wait_for(state="attached", timeout=60_000)  # rows loaded
        page.get_by_role("button", name="Show All Names").click()
        bob_link = page.locator("td.name a.name-shown", has_text="bob")
        bob_link.wait_for(state="visible", timeout=30_000)
        shot(page, "3_gradebook")
        for student in ("alice", "bob"):
            flag = page.locator("tr", has_text=student).first.locator("td.flagged .glyphicon-flag")
            assert flag.count() == (1 if student in _flagged(course) else 0), student

        # bob's submission: override a score, add a comment
        bob_link.click()
        score = page.locator(f"input.score#{first_test}")
        score.wait_for(timeout=60_000)
        page.wait_for_function("() => window.MathJax && MathJax.loaded === true", timeout=60_000)
        assert (score.input_value(), score.get_attribute("placeholder")) == ("", "0")  # autograded 0, no override
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"):
            score.fill(str(OVERRIDE))
            score.press("Enter")
        comment = page.locator(f"textarea#{first_answer}-comment")
        with page.expect_response(lambda r: "/formgrader/api/comment/" in r.url and r.request.method == "PUT"):
            comment.fill(COMMENT)
            comment.blur()
        score.scroll_into_view_if_needed()
        page.mouse.wheel(0, -200)  # the answer's comment box above the test cell's score
        shot(page, "4_override", full_page=False)
        page.reload()
        page.locator(f"input.score#{first_test}").wait_for(timeout=60_000)
        page.wait_for_function(f"() => document.querySelector('input.score#{first_test}').value === '{OVERRIDE}'",
                               timeout=30_000)
        # formgrader fills the comment box after the score box (seen once under load: read before it was filled)
        comment_box = f"textarea#{first_answer}-comment"
        try:
            page.wait_for_function("([box, want]) => document.querySelector(box).value === want",
                                   arg=[comment_box, COMMENT], timeout=30_000)
        except PlaywrightTimeout:
            pass  # the assertion says what the box holds
        assert page.locator(comment_box).input_value() == COMMENT
    finally:
        console.write(b.ARTIFACTS / "formgrader-console.log")
        page.close()
    # MathJax 2's web-font probe (HTML-CSS output) loads a font from about:blank, which Chromium
    # refuses and reports; nothing leaves the machine, and the page's math is typeset.
    font_probe = [e for e in console.errors if "about:blank" in e]
    assert [e for e in console.errors if e not in font_probe] == []
    assert [u for u in outside if "colab-badge" not in u and u != "about:blank"] == []  # MathJax too: local

    # the override reaches every export, the comment the feedback
    _autograder("export", "--course", str(course))
    export = course / "export"
    grades = {r["student_id"]: r for r in _rows(export / "grades.csv")}
    assert (float(grades["bob"]["score"]), float(grades["alice"]["score"])) == (OVERRIDE, max_score)
    canvas = {r["SIS User ID"]: r for r in _rows(export / "canvas.csv") if r["SIS User ID"]}
    assert (canvas["bob"][LESSON], canvas["alice"][LESSON]) == (f"{OVERRIDE:g}", f"{max_score:g}")
    moodle = {r["ID number"]: r for r in _rows(export / "moodle.csv")}
    assert (moodle["bob"][LESSON], moodle["alice"][LESSON]) == (f"{OVERRIDE:g}", f"{max_score:g}")
    summary = (export / "summary.md").read_text()
    assert (f"- `bob`, `{LESSON}` (formgrader: `/formgrader/manage_students/bob/{LESSON}`; "
            f"notebook: `autograded/bob/{LESSON}/{LESSON}.ipynb`):") in summary
    assert (course / "autograded" / "bob" / LESSON / f"{LESSON}.ipynb").exists()
    _autograder("feedback", LESSON, "--student", "bob", "--course", str(course))
    html = (course / "feedback" / "bob" / LESSON / f"{LESSON}.html").read_text()
    assert COMMENT in html
    assert f"{OVERRIDE:g} / {max_score:g}" in html or f"{float(OVERRIDE)} / {float(max_score)}" in html
