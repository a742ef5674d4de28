"""HideHiddenTests: an autograded notebook turned into what its feedback page may show.

What a page shows, decided per output by whether student code that ran after a hidden test
could have produced it (HideHiddenTests, first in GenerateFeedback.preprocessors):

* an ordinary code cell (an answer or a provided cell) shows the outputs the student
  SUBMITTED (course/submitted/<student>/<lesson>/<lesson>.ipynb, the cell matched by its id,
  else by its position among the cells that are not test cells), never what the grader's
  run printed: in that run, code in an ordinary cell after a test cell could read the
  executed hidden tests (from the kernel's history, say) and print them;
* a graded test cell shows passed or failed, and when it failed the error's name (a Python
  or course exception name, else "Error") and a message cut to MAX_MESSAGE characters
  (shown.failure, which the class report reads too), never what student code printed or
  displayed during the test;
* the hidden-test regions are removed from the test cells' code (cells.without_hidden_tests: an
  unterminated region hides the rest of the cell);
* Markdown cells show the student's own text, rendered and then sanitised with the page.
"""
import base64
import binascii
import html
import re

from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.preprocessors import NbGraderPreprocessor

from .. import cells
from ..course import lesson_notebook
from ..shown import cut, failure, without_secrets

MAX_TEXT = 20_000  # characters of one submitted text output shown
MAX_IMAGE = 2_000_000  # base64 characters of one submitted image shown
MAX_OUTPUTS = 50  # submitted outputs shown per cell
SAFE_MIME = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/gif")
PASSED = "Test passed.\n"
HIDDEN_NOTE = "(the traceback is not shown: this test cell runs hidden tests)"


class HideHiddenTests(NbGraderPreprocessor):
    """Turn an autograded notebook into what its feedback may show (see the module's docstring)."""

    def preprocess(self, nb, resources):
        # the hidden tests' lines, from this notebook and from the lesson's source (the grader may keep them
        # out of the autograded notebook): blanked wherever they still appear, a last line of defence
        source = lesson_notebook(self.config, resources, "source")
        code = [c for c in nb.cells + (source.cells if source is not None else []) if c.get("cell_type") == "code"]
        secrets = sorted({line for cell in code for line in cells.secret_lines(cell.source)}, key=len, reverse=True)
        visible = {line.strip() for cell in nb.cells for line in cells.without_hidden_tests(cell.source).splitlines()}
        secrets = [s for s in secrets if s not in visible]  # also shown to students: not a secret
        with_hidden = {cells.grade_id(c) for c in code if cells.HIDDEN_BEGIN in c.source}
        submitted = lesson_notebook(self.config, resources, "submitted")
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
        nb.cells.insert(0, _summary(nb.cells))
        return nb, resources


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


def _verdict(outputs, had_hidden):
    """A test cell's outcome: passed, or the error's name and a bounded message (the grader's error if any)."""
    shown = failure(outputs)
    if shown is None:
        return [new_output("stream", name="stdout", text=PASSED)]
    name, message = shown
    return [new_output("error", ename=name, evalue=message,
                       traceback=[f"{name}: {message}"] + ([HIDDEN_NOTE] if had_hidden else []))]


def _summary(notebook_cells):
    """A first cell listing each failed test cell and what its message says, the diagnosis first (escaped: a
    message may quote the student's own values)."""
    failed = [(cells.grade_id(c), o.evalue) for c in notebook_cells if c.cell_type == "code" and cells.is_test(c)
              for o in c.outputs[:1] if o.get("output_type") == "error"]
    if not failed:
        return new_markdown_cell("**All the tests of this lesson passed.**")
    items = "".join(f"<li><code>{html.escape(str(name))}</code>: {html.escape(message)}</li>"
                    for name, message in failed)
    return new_markdown_cell(f"<p><strong>What to look at first</strong> ({len(failed)} test cell"
                             f"{'s' if len(failed) > 1 else ''} failed; each is shown again below, at its "
                             f"exercise):</p><ul>{items}</ul>")


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
                          text=cut(_text(out.get("text", "")), MAX_TEXT))
    if kind == "error":
        return new_output("error", ename=cut(out.get("ename", ""), 200), evalue=cut(out.get("evalue", ""), MAX_TEXT),
                          traceback=[cut(t, MAX_TEXT) for t in list(out.get("traceback", []))[:200]])
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
            value = cut(value, MAX_TEXT)
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
        return without_secrets(text, secrets)
    if "text" in out:
        out.text = clean(out.text)
    if "evalue" in out:
        out.evalue = clean(out.evalue)
        out.traceback = [clean(t) for t in out.traceback]
    for key, value in out.get("data", {}).items():
        if isinstance(value, str):
            out.data[key] = clean(value)


# --- the page: an allow-list sanitiser on the final HTML, and a policy that forbids scripts -------------------
