"""`python -m autograder report`: what the class got wrong and why, one offline page per lesson.

A tiny class (tests/autograder/tiny.py) is graded for real, then reported: the failures grouped by the check
that failed, with who; the flags and what is pending; no hidden test; nothing loaded from outside.
"""
import re
import shutil

import pytest

from autograder.class_report import build_report, check_of, point_biserial
from autograder.run import grade
from tests.autograder import tiny
from tests.nbtools import fill_solutions, load, submit

ANSWERS = {  # student: (double's body, square's body)
    "ada": ("return 2 * x", "return x * x"),
    "bob": ("return 2 * x", "return x + x"),        # square(3) is 6: the visible check fails
    "cy": ("return 2 * x", "return 3 * x"),         # square(3) is 9, square(-2) is -6: the hidden check fails
    "dee": ("return x + 2", "return x + x"),        # both wrong
    "eve": ("return 2 * x", "return abs(x) * x if x > 0 else x * x"),
}


@pytest.fixture(scope="module")
def reported(tiny_course, tmp_path_factory):
    course = tmp_path_factory.mktemp("report") / "course"
    shutil.copytree(tiny_course, course)
    release = load(course / "release" / tiny.LESSON / f"{tiny.LESSON}.ipynb")
    for student, (double, square) in ANSWERS.items():
        nb = fill_solutions(release, tiny.lesson())
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id == "double":
                cell.source = f"def double(x):\n    {double}\n"
            elif grade_id == "square":
                cell.source = f"def square(x):\n    {square}\n"
        submit(course, tiny.LESSON, student, nb)
    grade(course, [tiny.LESSON], jobs=2, log=lambda *_: None)
    index = build_report(course, log=lambda *_: None)
    return course, index, (index.parent / f"{tiny.LESSON}.html").read_text()


def test_each_exercise_lists_its_failures_grouped_by_the_check_with_who(reported):
    _, _, page = reported
    square = page[page.index("<code>test_square</code>: "):]
    assert "3 of 5 did not get full marks" in square
    # one check, whatever its numbers: square(3) should be 9 (bob, dee) and square(-2) should be 4 (cy)
    row = re.search(r"<tr><td class=n>3 \(60%\)</td><td>AssertionError: square\(3\) should be 9(.*?)</td><td>(.*?)</td>",
                    square)
    assert row and all(s in row.group(2) for s in ("bob", "cy", "dee")) and "eve" not in row.group(2), square[:2000]
    assert "<li>square(-2) should be 4 (cy)</li>" in row.group(1)
    assert re.search(r"1 \(20%\)</td><td>AssertionError: double\(3\) should be 6</td><td>dee ", page)


def test_the_exercises_are_ordered_hardest_first_with_their_item_statistics(reported):
    _, _, page = reported
    table = page[page.index("<caption>Each exercise"):page.index("</table>")]
    assert table.index("test_square") < table.index("test_double")
    assert "2 of 5" in table and "40%" in table and "4 of 5" in table and "80%" in table
    assert "point-biserial" in page and 'alt="Histogram' in page and 'alt="Bar chart' in page


def test_the_page_shows_no_hidden_test_and_loads_nothing(reported):
    course, index, page = reported
    assert "assert square(-2) == 4" not in page and "np.array_equal(double(np.arange(4))" not in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert "default-src 'none'" in page
    assert re.search(r'<a href="\.\./feedback/cy/00_tiny/00_tiny\.html">feedback</a>', page)
    assert f'href="{tiny.LESSON}.html"' in index.read_text()


def test_a_message_is_grouped_by_its_check_not_its_numbers():
    a = "output, L = 37, causal=False: values differ (largest gap at index (0, 1, 28, 2): got np.float64(0.61), expected"
    b = "output, L = 37, causal=False: values differ (largest gap at index (0, 0, 3, 9): got np.float64(-1e-05), expected"
    assert check_of(a) == check_of(b)
    assert check_of(a) != check_of(a.replace("causal=False", "causal=True"))
    assert check_of("a float32 result for a float64 input, 3 rows") == "a float32 result for a float64 input, # rows"


def test_failures_are_grouped_by_the_mistake_they_name_whatever_case_failed():
    from autograder.class_report import Submission, _items, _lesson_page
    a = "Diagnosis: the scores are divided by d_k: scale by 1 / sqrt(d_k) [weights for d_k=4: largest gap at (2,)]"
    b = "Diagnosis: the scores are divided by d_k: scale by 1 / sqrt(d_k) [output for d_k=16, d_v=3: largest gap]"
    c = "weights for d_k=4: values differ. [largest gap at index (1,), where yours is 0.3]"
    assert check_of(a) == check_of(b) != check_of(c)
    students = [Submission(name, status="graded", score=0, max_score=1, cells={"t": 0.0},
                           failures={"t": ("AssertionError", message)}) for name, message in
                [("ann", a), ("bob", b), ("cy", c)]]
    items = _items([("t", 1.0)], students)
    assert sorted(len(g) for g in items[0]["groups"]) == [1, 2]
    page = _lesson_page("00_x", items, students)
    assert "<strong>the scores are divided by d_k: scale by 1 / sqrt(d_k)</strong>" in page


def test_point_biserial_matches_its_formula_and_is_undefined_where_nothing_varies():
    passed, rest = [1, 1, 0, 0, 1], [4.0, 3.0, 1.0, 2.0, 3.0]
    import numpy as np
    assert point_biserial(passed, rest) == pytest.approx(np.corrcoef(passed, rest)[0, 1])
    assert point_biserial([1, 1, 1], [1.0, 2.0, 3.0]) is None
    assert point_biserial([1, 0, 1], [2.0, 2.0, 2.0]) is None


def test_what_a_message_holds_is_escaped(tmp_path):
    from autograder.class_report import Submission, _items, _lesson_page
    from autograder.job import Finding
    hostile = Submission("ann", status="graded", score=0, max_score=1, cells={"t": 0.0},
                         failures={"t": ("AssertionError", "<script>alert(1)</script> got <img src=x>")},
                         flags=[Finding("integrity", "<a href='javascript:x'>click</a>")])
    page = _lesson_page("00_x", _items([("t", 1.0)], [hostile]), [hostile])
    assert "<script>alert" not in page and "<img src=x>" not in page and "<a href='javascript" not in page
    assert "&lt;script&gt;" in page


def test_the_page_passes_axe_cores_wcag_a_and_aa_rules_and_loads_nothing_in_a_browser(reported, tmp_path):
    from tests import browser
    why = browser.missing_prerequisite()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    from tests.site.test_site import AXE, WCAG_A_AA
    course, index, _ = reported
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser.CHROMIUM, args=browser.CHROMIUM_FLAGS)
        try:
            page = chromium.new_page(bypass_csp=True)  # (axe is injected as a script, which the page's policy refuses)
            requests, errors = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            for url in (index.parent / f"{tiny.LESSON}.html", index):
                page.goto(url.as_uri(), wait_until="load")
                page.add_script_tag(path=str(AXE))
                violations = page.evaluate("options => axe.run(document, options)", WCAG_A_AA)["violations"]
                assert not violations, [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in violations]
            assert [r for r in requests if not r.startswith(("file:", "data:"))] == [] and errors == []
        finally:
            chromium.close()
