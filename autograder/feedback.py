"""`feedback`: HTML feedback pages that show no hidden test and run nothing in the reader's browser.

What a page shows, decided per output by whether student code that ran after a hidden test
could have produced it (HideHiddenTests, first in GenerateFeedback.preprocessors):

* an ordinary code cell (an answer or a provided cell) shows the outputs the student
  SUBMITTED (course/submitted/<student>/<lesson>/<lesson>.ipynb, the cell matched by its id,
  else by its position among the cells that are not test cells), never what the grader's
  run printed: in that run, code in an ordinary cell after a test cell could read the
  executed hidden tests (from the kernel's history, say) and print them;
* a graded test cell shows passed or failed, and when it failed the error's name (a Python
  or course exception name, else "Error") and a message cut to MAX_MESSAGE characters,
  never what student code printed or displayed during the test;
* the hidden-test regions are removed from the test cells' code (cells.without_hidden_tests: an
  unterminated region hides the rest of the cell);
* Markdown cells show the student's own text, rendered and then sanitised with the page.

What the reader's browser runs: nothing. SafeFeedbackExporter (GenerateFeedback.exporter_class)
sanitises the FINAL HTML, after nbconvert and nbgrader's template have run: the head is
rebuilt from the template's style sheets (with every url() and @import removed) and a
Content-Security-Policy that allows no script and no load from anywhere but data: images;
the body goes through an allow-list (bleach): ALLOWED_TAGS, the attributes of each tag,
links only to http, https, mailto or within the page, images only as base64 PNG, JPEG or
GIF data, inline styles only without url(), expression() or escapes.
"""
import base64
import binascii
import builtins
import html
import re
from pathlib import Path

import nbformat
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

from . import cells

MAX_MESSAGE = 300  # characters of a failed test's message shown to the student, "..." included
MAX_TEXT = 20_000  # characters of one submitted text output shown
MAX_IMAGE = 2_000_000  # base64 characters of one submitted image shown
MAX_OUTPUTS = 50  # submitted outputs shown per cell
SAFE_MIME = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/gif")
# error names a failed test may show: Python's own exceptions and the course's (others become "Error": a class
# name is chosen by whoever raises it, and student code can raise a class named after a hidden test)
COURSE_ERRORS = {"ForbiddenCall", "IntegrityError", "CellTimeoutError", "DeadKernelError", "CellExecutionError"}
PYTHON_ERRORS = {name for name, value in vars(builtins).items()
                 if isinstance(value, type) and issubclass(value, BaseException)}
PASSED = "Test passed.\n"
HIDDEN_NOTE = "(the traceback is not shown: this test cell runs hidden tests)"


class HideHiddenTests(NbGraderPreprocessor):
    """Turn an autograded notebook into what its feedback may show (see the module's docstring)."""

    def preprocess(self, nb, resources):
        # the hidden tests' lines, from this notebook and from the lesson's source (the grader may keep them
        # out of the autograded notebook): blanked wherever they still appear, a last line of defence
        source = _course_notebook(self.config, resources, "source")
        code = [c for c in nb.cells + (source.cells if source is not None else []) if c.get("cell_type") == "code"]
        secrets = sorted({line for cell in code for line in cells.secret_lines(cell.source)}, key=len, reverse=True)
        visible = {line.strip() for cell in nb.cells for line in cells.without_hidden_tests(cell.source).splitlines()}
        secrets = [s for s in secrets if s not in visible]  # also shown to students: not a secret
        with_hidden = {cells.grade_id(c) for c in code if cells.HIDDEN_BEGIN in c.source}
        submitted = _course_notebook(self.config, resources, "submitted")
        if submitted is None:
            self.log.warning("no submitted notebook for %s: ordinary cells are shown without outputs",
                             resources.get("nbgrader", {}))
        own = _OwnOutputs(submitted)
        nb.metadata.pop("widgets", None)  # widget state: rendered as a script
        position = 0
        for cell in nb.cells:
            cell.get("metadata", {}).pop("autograder", None)  # what grading removed from test cells
            if cell.cell_type != "code":
                continue  # Markdown: the student's text, sanitised with the whole page (SafeFeedbackExporter)
            had_hidden = cells.HIDDEN_BEGIN in cell.source or cells.grade_id(cell) in with_hidden - {None}
            cell.source = cells.without_hidden_tests(cell.source)
            if cells.is_test(cell):
                cell.outputs = _verdict(cell.get("outputs", []), had_hidden)
            else:
                mine = own.find(cell.get("id"), position)
                position += 1
                outputs = mine.get("outputs") if mine is not None else None
                cell.outputs = [o for o in map(_own, outputs[:MAX_OUTPUTS] if isinstance(outputs, list) else [])
                                if o is not None]
                cell.execution_count = None if mine is None else mine.get("execution_count")
            for out in cell.outputs:
                _scrub(out, secrets)
        return nb, resources


def _course_notebook(config, resources, step):
    """The notebook being turned into feedback as the student submitted it (step "submitted":
    course/submitted/<student>/<lesson>/) or the lesson's source ("source"), or None."""
    from nbgrader.coursedir import CourseDirectory
    try:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=config)
        if step == "submitted":
            folder = coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])
        else:
            folder = coursedir.format_path(coursedir.source_directory, ".", info["assignment"])
        return nbformat.read(str(Path(folder, f"{info['notebook']}.ipynb")), as_version=4)
    except Exception:  # noqa: BLE001: missing, unreadable or invalid: no outputs shown, never a crash
        return None


class _OwnOutputs:
    """The submitted notebook's code cells, found by cell id, else by position among the non-test code cells."""

    def __init__(self, submitted):
        code = [c for c in (submitted.cells if submitted is not None else []) if c.get("cell_type") == "code"]
        self.by_id = {}
        for c in code:
            if c.get("id"):
                self.by_id.setdefault(c["id"], c)
        self.ordered = [c for c in code if not cells.is_test(c)]

    def find(self, cell_id, position):
        if cell_id and cell_id in self.by_id:
            return self.by_id[cell_id]
        return self.ordered[position] if position < len(self.ordered) else None


def _cut(text, limit):
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _verdict(outputs, had_hidden):
    """A test cell's outcome: passed, or the error's name and a bounded message (the grader's error if any)."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if not errors:
        return [new_output("stream", name="stdout", text=PASSED)]
    error = next((o for o in errors if o.get("ename") == "IntegrityError"), errors[0])
    name = str(error.get("ename", ""))
    name = name if name in PYTHON_ERRORS or name in COURSE_ERRORS else "Error"
    message = _cut(error.get("evalue", ""), MAX_MESSAGE)
    return [new_output("error", ename=name, evalue=message,
                       traceback=[f"{name}: {message}"] + ([HIDDEN_NOTE] if had_hidden else []))]


_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def _own(out):
    """A submitted output as the page may show it: bounded, only inert MIME types, images as base64 data
    (None: not shown, a malformed output included)."""
    try:
        return _own_output(out)
    except Exception:  # noqa: BLE001: whatever the student's file holds, feedback is made
        return None


def _own_output(out):
    kind = out.get("output_type")
    if kind == "stream":
        return new_output("stream", name="stderr" if out.get("name") == "stderr" else "stdout",
                          text=_cut(_text(out.get("text", "")), MAX_TEXT))
    if kind == "error":
        return new_output("error", ename=_cut(out.get("ename", ""), 200), evalue=_cut(out.get("evalue", ""), MAX_TEXT),
                          traceback=[_cut(t, MAX_TEXT) for t in list(out.get("traceback", []))[:200]])
    if kind not in ("display_data", "execute_result"):
        return None
    data, metadata = {}, {}
    for mime, value in (out.get("data") or {}).items():
        if mime not in SAFE_MIME:
            continue  # JavaScript, SVG, widget views, PDF...: dropped
        value = _text(value)
        if mime.startswith("image/"):
            if len(value) > MAX_IMAGE or not _BASE64.fullmatch(value) or not _decodes(value):
                continue
            size = {k: v for k, v in (out.get("metadata", {}).get(mime) or {}).items()
                    if k in ("width", "height") and isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10_000}
            if size:
                metadata[mime] = size
        else:
            value = _cut(value, MAX_TEXT)
        data[mime] = value
    if not data:
        return None
    if kind == "execute_result":
        return new_output("execute_result", data=data, metadata=metadata, execution_count=out.get("execution_count"))
    return new_output("display_data", data=data, metadata=metadata)


def _text(value):
    return "".join(value) if isinstance(value, list) else str(value)


def _decodes(value):
    try:
        base64.b64decode("".join(value.split()), validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


def _scrub(out, secrets):
    def clean(text):
        for secret in secrets:
            text = text.replace(secret, "[hidden test]")
        return text
    if "text" in out:
        out.text = clean(out.text)
    if "evalue" in out:
        out.evalue = clean(out.evalue)
        out.traceback = [clean(t) for t in out.traceback]
    for key, value in out.get("data", {}).items():
        if isinstance(value, str):
            out.data[key] = clean(value)


# --- the page: an allow-list sanitiser on the final HTML, and a policy that forbids scripts -------------------

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
ALLOWED_TAGS = frozenset("""a abbr b blockquote br caption cite code col colgroup dd del details dfn div dl dt em
    figcaption figure h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp small span strong sub summary
    sup table tbody td tfoot th thead tr tt u ul var""".split())
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})  # for links; images: only IMAGE_SOURCE
IMAGE_SOURCE = re.compile(r"data:image/(png|jpeg|gif);base64,[a-z0-9+/=]*")
CSS_PROPERTIES = frozenset("""color background-color font-weight font-style font-size font-family text-align
    text-decoration vertical-align white-space line-height width height max-width max-height min-width
    min-height margin margin-top margin-bottom margin-left margin-right padding padding-top padding-bottom
    padding-left padding-right border border-top border-bottom border-left border-right border-color
    border-style border-width border-collapse border-spacing list-style-type""".split())
CSS_FUNCTIONS = ("rgb(", "rgba(", "hsl(", "hsla(")
CSS_FORBIDDEN = ("url(", "expression", "\\", "@", "javascript", "vbscript", "behavior", "binding", "image",
                 "<", ">", "&", "import", "element(", "var(", "attr(")
NAME = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
SIZE = re.compile(r"\d{1,5}(%|px)?")


def _normalise(value):
    """A URL as a browser matches its scheme: entities decoded, controls, spaces and non-ASCII out, lower case."""
    value = html.unescape(value)
    value = re.sub(r"[`\x00-\x20\x7f-\xa0\s]+", "", value)
    return re.sub(r"[^\x00-\x7f]", "", value).lower()


def _link_allowed(value):
    url = _normalise(value)
    if url.startswith("#"):
        return True
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", url)
    return bool(scheme) and scheme.group(1) in ALLOWED_PROTOCOLS


def _style_allowed(value):
    css = re.sub(r"/\*.*?\*/", "", html.unescape(value), flags=re.S).lower()
    css = re.sub(r"\s+", "", css)
    if any(bad in css for bad in CSS_FORBIDDEN):
        return False
    for function in CSS_FUNCTIONS:
        css = css.replace(function, "")
    return "(" not in css


ATTRIBUTES = {  # tag -> {attribute: check of its value}; "*": every allowed tag
    "*": {"class": lambda v: True, "title": lambda v: True, "id": NAME.fullmatch, "style": _style_allowed},
    "a": {"href": _link_allowed, "name": NAME.fullmatch},
    "img": {"src": lambda v: bool(IMAGE_SOURCE.fullmatch(_normalise(v))), "alt": lambda v: True,
            "width": lambda v: bool(SIZE.fullmatch(v.strip())), "height": lambda v: bool(SIZE.fullmatch(v.strip()))},
    "td": {"colspan": str.isdigit, "rowspan": str.isdigit, "align": lambda v: v.lower() in ("left", "right", "center")},
    "th": {"colspan": str.isdigit, "rowspan": str.isdigit, "align": lambda v: v.lower() in ("left", "right", "center")},
    "ol": {"start": str.isdigit},
    "table": {"border": str.isdigit},
}


def _attribute_allowed(tag, name, value):
    check = ATTRIBUTES.get(tag, {}).get(name) or ATTRIBUTES["*"].get(name)
    return bool(check and check(value))


def _cleaner():
    from bleach.css_sanitizer import CSSSanitizer
    from bleach.sanitizer import Cleaner
    # bleach drops a URL whose scheme is not in `protocols` after our checks: "data" is listed so that images
    # (checked against IMAGE_SOURCE) survive; links are held to ALLOWED_PROTOCOLS by _link_allowed
    return Cleaner(tags=ALLOWED_TAGS, attributes=_attribute_allowed, protocols=ALLOWED_PROTOCOLS | {"data"},
                   strip=True, strip_comments=True,
                   css_sanitizer=CSSSanitizer(allowed_css_properties=CSS_PROPERTIES, allowed_svg_properties=()))


_RAW_TEXT = re.compile(r"<(script|style|template|noscript|textarea|title|iframe|noembed|noframes|xmp)\b[^>]*>"
                       r".*?</\1\s*>", re.S | re.I)


def _template_css(css):
    """The template's own style sheet, loading nothing: no @import, no url() (fonts, images)."""
    css = re.sub(r"@import[^;]*;?", "", css, flags=re.I)
    css = re.sub(r"url\s*\([^)]*\)", "none", css, flags=re.I)
    css = re.sub(r"expression\s*\(", "(", css, flags=re.I)
    return css.replace("</", "<\\/")


def sanitize_page(page):
    """The final feedback HTML, safe to open: a rebuilt head (styles, CSP) and an allow-listed body.

    The template writes the head before any cell, so everything up to the first `</head>` is the
    template's; only its <title> text and <style> sheets are kept. Everything after it goes
    through the allow-list, whatever it claims to be.
    """
    end = page.lower().find("</head>")
    head, body = (page[:end], page[end:]) if end >= 0 else ("", page)
    title = re.search(r"<title>(.*?)</title>", head, re.S | re.I)
    title = html.escape(html.unescape(re.sub(r"<[^>]*>", "", title.group(1))).strip()) if title else "Feedback"
    styles = [_template_css(s) for s in re.findall(r"<style[^>]*>(.*?)</style\s*>", head, re.S | re.I)]
    body = _cleaner().clean(_RAW_TEXT.sub("", body))
    return "\n".join([
        "<!DOCTYPE html>", "<html>", "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="referrer" content="no-referrer">', f"<title>{title}</title>",
        *[f"<style>{s}</style>" for s in styles], "</head>", "<body>", body, "</body>", "</html>", ""])


class SafeFeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter (with nbgrader's feedback template) whose final page is sanitize_page'd."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return sanitize_page(output), resources


def generate_feedback(course_root, lessons=None, students=None, log=print):
    """HTML feedback in course_root/feedback/<student>/<lesson>/ for every autograded submission."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from .grading import grading_config
    config = grading_config(course_root)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    written = []
    for folder in sorted(Path(course_root, "autograded").glob("*/*")):
        student, lesson = folder.parent.name, folder.name
        if (lessons and lesson not in lessons) or (students and student not in students):
            continue
        result = api.generate_feedback(lesson, student, force=True)
        target = Path(course_root, "feedback", student, lesson)
        if result["success"]:
            written += sorted(target.glob("*.html"))
            log(f"feedback {lesson} {student} -> {target}")
        else:
            log(f"feedback {lesson} {student} FAILED: {(result['error'] or result['log']).strip()[-500:]}")
    return written
