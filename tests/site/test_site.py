"""The course website (python -m tools.site build): no answer published, nothing loaded from the network.

The site is built once for the module: in full mode under COURSE_CI=1 (.ci/run
has built it just before, so every lesson comes from build/site-cache/), in fast
mode otherwise (build/site-fast/, a few minutes from cold). Checked:

* every lesson in solutions/ has a page, the student's version of it: stubs,
  visible tests and their pass messages, figures, each explorer's first picture;
* each page of the manual (docs/instructors.md, design.md, testing.md) is on the site
  with every heading of its document;
* no line of a solution body or of a hidden test is anywhere in the site
  (pages, search index, copies of notebooks), and the scan does find one planted;
* no page names a resource on another host (scripts, styles, fonts, images);
* code keeps AA contrast in the Pygments style Sphinx writes before the theme's (a page read during a build
  of the folder shows that one);
* in Chromium, served from localhost: every page loads with no console error and
  no request leaving localhost, every image loads, the math is typeset, the next /
  previous links walk the lessons and the manual in order, and the search box finds a term of
  lesson 03. Screenshots go to test-artifacts/site/.

`python -m tools.colab --from-origin`, which points the badges at a fork, is
tested here too, in a temporary copy of the repository with a made-up origin.

The default run loads the home page and lesson 03's in Chromium (tests/full_run.py: SITE_PAGES); `--full` every
page, the walk and the search.
"""
import functools
import html.parser
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

from tests import browser as b
from tests.nbtools import NOTEBOOKS, REPO, SOLUTIONS, load
from tools import colab
from tools import site

FULL = os.environ.get("COURSE_CI") == "1"
LESSONS = site.lessons()
ARTIFACTS = REPO / "test-artifacts" / "site"
SEARCH_TERM = "permutation equivariance"
SEARCH_LESSON = "03_queries_keys_values"
# files of the site that hold lesson text (the theme's and MathJax's own files are copied from packages)
LESSON_TEXT_SUFFIXES = {".html", ".js", ".txt", ".ipynb", ".json", ".svg", ".md"}
PACKAGE_ASSETS = ("_static/mathjax/", "_static/scripts/", "_static/styles/", "_static/vendor/", "_static/locales/")


@pytest.fixture(scope="module")
def html_dir(tmp_path_factory):
    """The site, built and copied for this run. Another run in the same checkout builds the same folder, and every
    build rewrites files of it, even one with nothing to rebuild (_static/pygments.css is first written in Sphinx's
    style, then in the theme's): the builds take turns under a lock, and the pages are served from the copy."""
    import fcntl
    out = site.output_dir(fast=not FULL)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = site.build(fast=not FULL, log=lambda *_: None)
        copy = tmp_path_factory.mktemp("site") / "html"
        shutil.copytree(built, copy)
    return copy


@pytest.fixture(scope="module")
def artifacts():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


class _Text(html.parser.HTMLParser):
    """The text of an HTML page, entities decoded, plus every attribute value."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.attributes = [], []

    def handle_data(self, data):
        self.parts.append(data)

    def handle_starttag(self, tag, attrs):
        self.attributes += [v for _, v in attrs if v]


def readable_text(path):
    """A file's text; for a page, also what a reader sees (code split into Pygments' spans, entities) and its
    attribute values (a title, an alt text, a link)."""
    raw = path.read_text(errors="replace")
    if path.suffix != ".html":
        return raw
    parser = _Text()
    parser.feed(raw)
    return "\n".join([raw, "".join(parser.parts), *parser.attributes])


def site_files(html_dir):
    for path in sorted(html_dir.rglob("*")):
        rel = path.relative_to(html_dir).as_posix()
        if path.is_file() and path.suffix in LESSON_TEXT_SUFFIXES and not rel.startswith(PACKAGE_ASSETS):
            yield rel, path


@functools.lru_cache(maxsize=None)
def published_texts(html_dir):
    """[(path in the site, readable_text)] of every file the site publishes, read once for every lesson's scan."""
    return [(rel, readable_text(path)) for rel, path in site_files(html_dir)]


@functools.lru_cache(maxsize=None)
def published():
    """Every student copy: a line in one of them is public (lesson 02 gives lesson 01's encoder ready-made)."""
    return [load(NOTEBOOKS / f"{lesson}.ipynb") for lesson in LESSONS]


def secrets(lesson):
    return site.secret_lines(load(SOLUTIONS / f"{lesson}.ipynb"), published())


def lesson_page(html_dir, lesson):
    return html_dir / "lessons" / f"{lesson}.html"


# ---------------------------------------------------------------- what the pages hold

def test_every_lesson_in_solutions_has_a_page(html_dir):
    assert LESSONS, "no lesson in solutions/"
    for lesson in LESSONS:
        assert lesson_page(html_dir, lesson).exists(), f"no page for {lesson}"
    left_over = sorted(p.stem for p in html_dir.glob("lessons/*.html") if p.stem not in LESSONS)
    assert left_over == [], f"pages of lessons that are no longer in solutions/: {left_over}"
    index = (html_dir / "index.html").read_text()
    for lesson in LESSONS:
        assert f'href="lessons/{lesson}.html"' in index, f"the index does not link {lesson}"
    assert ("FAST-MODE" in index) == (not FULL), "the index must say when its numbers come from fast mode"


@pytest.mark.parametrize("name", site.MANUAL)
def test_each_page_of_the_manual_is_on_the_site_with_every_heading_of_its_document(html_dir, name):
    page = html_dir / "manual" / f"{name}.html"
    assert page.exists(), f"docs/{name}.md has no page on the site"
    assert f'href="manual/{name}.html"' in (html_dir / "index.html").read_text(), f"the index does not link {name}"
    shown = readable_text(page)
    headings = [line.lstrip("#").strip() for line in (REPO / "docs" / f"{name}.md").read_text().splitlines()
                if re.match(r"#{1,4} ", line)]
    assert headings, f"docs/{name}.md has no heading"
    missing = [h for h in headings if html.unescape(h).replace("`", "") not in shown.replace("’", "'")]
    assert missing == [], f"headings of docs/{name}.md not on its page: {missing}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_page_is_the_student_version_with_the_outputs_of_a_run(html_dir, lesson):
    text = readable_text(lesson_page(html_dir, lesson))
    solution = load(SOLUTIONS / f"{lesson}.ipynb")
    n_answers = sum(1 for c in solution.cells if c.cell_type == "code" and site.is_answer(c))
    n_tests = sum(1 for c in solution.cells if site.is_test(c))
    assert text.count("raise NotImplementedError") >= n_answers, "an exercise cell is not the student's stub"
    assert n_tests == 0 or "visible tests passed" in text, "the test cells' pass messages are missing"
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    assert "Traceback" not in text
    assert re.search(r'<img[^>]+src="\.\./_images/[0-9a-f]+\.png"', lesson_page(html_dir, lesson).read_text()), \
        "no figure from the run"
    assert colab.colab_url(lesson) in text, "no Colab badge"
    # every measurement the run printed outside the exercises is on the page
    run = load(site.cached_run_path(lesson, fast=not FULL))  # the run this site was built from
    printed = [line.strip() for c in run.cells if c.cell_type == "code" and not site.is_answer(c)
               and not site.is_test(c) for o in c.outputs if o.output_type == "stream" and o.name == "stdout"
               for line in o.text.splitlines()[:3] if len(line.strip()) > 8]
    missing = [line for line in printed if re.sub(r"\s+", " ", line) not in re.sub(r"\s+", " ", text)]
    assert missing == [], f"printed by the run but not on the page: {missing[:3]}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_explorer_shows_its_first_picture_and_how_to_open_it_live(html_dir, lesson):
    explorers = sum("course_utils.explorers" in c.source for c in load(SOLUTIONS / f"{lesson}.ipynb").cells)
    page = lesson_page(html_dir, lesson).read_text()
    notes = [m.start() for m in re.finditer('class="course-explorer-note"', page)]
    if not explorers:
        pytest.skip(f"{lesson} has no explorer")
    assert notes, "an explorer is on the page without its note"
    for start in notes:
        before = page[max(0, start - 20000):start]
        last_cell = before[before.rfind('class="cell'):]
        output = last_cell[last_cell.find('class="cell_output'):]
        picture = re.search(r'<img[^>]+_images/[0-9a-f]+\.png', output) or \
            len(re.sub(r"<[^>]+>|\s", "", output)) > 40  # an explorer that shows HTML (tokens, a table)
        assert 'class="cell_output' in last_cell and picture, "the cell before an explorer's note shows nothing"
        note = page[start:page.find("</div>", start)]
        assert colab.colab_url(lesson) in note and re.search(r"jupyter</span>\s*<span[^>]*>lab", note), note
    assert "widget-view" not in page and "jupyter-widgets" not in page


# ---------------------------------------------------------------- no answer is published

@pytest.mark.parametrize("lesson", LESSONS)
def test_no_solution_or_hidden_test_line_anywhere_in_the_site(html_dir, lesson):
    lines = secrets(lesson)
    solution = load(SOLUTIONS / f"{lesson}.ipynb")
    if any("BEGIN SOLUTION" in c.source or "BEGIN HIDDEN TESTS" in c.source for c in solution.cells):
        assert lines, f"no secret line found in {lesson}: the scan would check nothing"
    leaks = [(rel, line) for rel, text in published_texts(html_dir) for line in site.leaked_lines(text, lines)]
    assert leaks == [], f"{len(leaks)} line(s) of a solution or hidden test published, e.g. {leaks[:3]}"


def test_the_scan_finds_a_solution_line_planted_in_a_page(html_dir, tmp_path):
    lesson = SEARCH_LESSON if SEARCH_LESSON in LESSONS else LESSONS[0]
    line = secrets(lesson)[0]
    page = tmp_path / "page.html"
    # as Pygments writes code: each token in its own span, quotes as entities
    tokens = "".join(f'<span class="n">{html_escape(tok)}</span>' for tok in re.split(r"(\s+)", line))
    page.write_text(lesson_page(html_dir, lesson).read_text().replace("</body>", f"<pre>{tokens}</pre></body>"))
    assert site.leaked_lines(readable_text(page), [line]) == [line]


def html_escape(text):
    import html
    return html.escape(text, quote=True)


def test_a_page_with_a_solution_is_refused_before_it_is_built():
    lesson = LESSONS[0]
    solution = load(SOLUTIONS / f"{lesson}.ipynb")
    student = load(NOTEBOOKS / f"{lesson}.ipynb")
    for cell in student.cells:  # a stale student copy that still holds the solution
        gid = site.nbgrader(cell).get("grade_id")
        if site.is_answer(cell):
            cell.source = next(c.source for c in solution.cells if site.nbgrader(c).get("grade_id") == gid)
    page = site.student_page(solution, student, lesson)
    assert site.leaked_lines(site.page_text(page), secrets(lesson))


def test_test_cells_keep_only_their_pass_message_and_no_error_survives():
    cell = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "t1",
                                                                        "locked": True, "points": 1}})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x: visible tests passed.\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="hidden: assert secret()\n"),
                    nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
                    nbformat.v4.new_output("error", ename="AssertionError", evalue="secret", traceback=["t"])]
    plain = nbformat.v4.new_code_cell("f()")
    plain.outputs = [nbformat.v4.new_output("error", ename="E", evalue="v", traceback=["t"])]
    answer = nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION",
                                       metadata={"nbgrader": {"solution": True, "grade_id": "a1"}})
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    run = nbformat.v4.new_notebook(cells=[answer, cell, plain])
    student = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("def f():\n    raise NotImplementedError()",
                                  metadata={"nbgrader": {"solution": True, "grade_id": "a1"}}),
        nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "t1"}})])
    page = site.student_page(run, student, "00_test")
    assert page.cells[0].source == "def f():\n    raise NotImplementedError()" and page.cells[0].outputs == []
    assert [o.text for o in page.cells[1].outputs] == ["x: visible tests passed.\n"]
    assert page.cells[2].outputs == []


def _widget_view(model_id):
    return nbformat.v4.new_output("display_data", data={site.WIDGET_VIEW: {"model_id": model_id}})


def test_an_explorer_becomes_its_first_picture_and_a_progress_bar_its_text():
    state = {
        "explorer": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]}},
        "slider": {"model_name": "IntSliderModel", "state": {"value": 3}},
        "out": {"model_name": "OutputModel", "state": {"outputs": [
            {"output_type": "stream", "name": "stdout", "text": "length 3\n"},
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0K", "text/plain": "fig"}},
            {"output_type": "error", "ename": "E", "evalue": "v", "traceback": []}]}},
        "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_label", "IPY_MODEL_progress"]}},
        "label": {"model_name": "HTMLModel", "state": {"value": "training: 100%"}},
        "progress": {"model_name": "FloatProgressModel", "state": {"value": 1.0}},
    }
    assert site.is_explorer(_widget_view("explorer"), state)
    assert not site.is_explorer(_widget_view("bar"), state)
    shown = site.static_widgets([_widget_view("explorer")], state)
    assert [o.get("text") or o["data"].get("image/png") for o in shown] == ["length 3\n", "iVBORw0K"]
    assert [o["data"]["text/html"] for o in site.static_widgets([_widget_view("bar")], state)] == ["training: 100%"]
    explorer_cell = nbformat.v4.new_code_cell("explorer")
    explorer_cell.outputs = [_widget_view("explorer")]
    run = nbformat.v4.new_notebook(cells=[explorer_cell], metadata={
        "widgets": {site.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}})
    page = site.student_page(run, nbformat.v4.new_notebook(), "00_test")
    assert "widgets" not in page.metadata  # no widget JavaScript on the page
    assert "course-explorer-note" in page.cells[1].metadata["tags"]
    assert colab.colab_url("00_test") in page.cells[1].source and "jupyter lab" in page.cells[1].source


def test_a_stale_student_copy_is_refused():
    run = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", metadata={"nbgrader": {"solution": True, "grade_id": "new_exercise"}})])
    with pytest.raises(site.SiteError, match="autograder release"):
        site.student_page(run, nbformat.v4.new_notebook(), "00_test")


# ---------------------------------------------------------------- offline

EXTERNAL = re.compile(r"^(https?:)?//", re.I)
LOADING_ATTRIBUTES = {"script": ["src"], "img": ["src", "srcset"], "link": ["href"], "iframe": ["src"],
                      "source": ["src", "srcset"], "video": ["src", "poster"], "audio": ["src"],
                      "embed": ["src"], "object": ["data"], "image": ["href", "xlink:href"], "use": ["href"]}


class _Loads(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.external = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and not set((attrs.get("rel") or "").split()) & {
                "stylesheet", "icon", "preload", "prefetch", "modulepreload", "manifest", "apple-touch-icon"}:
            return  # a plain link (prev/next, canonical) loads nothing
        for name in LOADING_ATTRIBUTES.get(tag, []):
            value = attrs.get(name) or ""
            if any(EXTERNAL.match(part.strip()) for part in value.split(",")):
                self.external.append(f"<{tag} {name}={value!r}>")
        if EXTERNAL.match(attrs.get("style", "").partition("url(")[2].strip("'\" ")):
            self.external.append(f"<{tag} style={attrs['style']!r}>")


def test_no_page_names_a_resource_on_another_host(html_dir):
    found = []
    for path in html_dir.rglob("*.html"):
        parser = _Loads()
        parser.feed(path.read_text())
        found += [f"{path.relative_to(html_dir)}: {e}" for e in parser.external]
    for path in html_dir.rglob("*.css"):
        css = re.sub(r"/\*.*?\*/", "", path.read_text(errors="replace"), flags=re.S)
        found += [f"{path.relative_to(html_dir)}: {m}" for m in re.findall(r"""(?:url\(|@import)\s*['"]?(?:https?:)?//[^)'"]*""", css)]
    assert found == [], found[:10]


def test_the_colab_badge_is_a_local_image_that_links_to_colab(html_dir):
    page = lesson_page(html_dir, LESSONS[0]).read_text()
    assert colab.BADGE_IMAGE not in page
    badge = re.search(r'<a[^>]+href="([^"]+)"[^>]*>\s*<img alt="Open In Colab" src="([^"]+)"', page)
    assert badge, "no Colab badge on the page"
    assert badge[1] == colab.colab_url(LESSONS[0]) and not EXTERNAL.match(badge[2])
    assert (lesson_page(html_dir, LESSONS[0]).parent / badge[2]).resolve().read_text().startswith("<svg")


# ---------------------------------------------------------------- in a browser

_missing = b.missing_prerequisite()
if _missing and os.environ.get("COURSE_CI") == "1":
    raise RuntimeError(f"browser tests cannot run under COURSE_CI=1: {_missing}")
needs_browser = pytest.mark.skipif(bool(_missing), reason=f"browser tests skipped: {_missing}")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(html_dir):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(html_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    if _missing:
        pytest.skip(_missing)
    with b.browser(tmp_path_factory.mktemp("site-chromium")) as context:
        yield context


class Visit:
    """A page opened in Chromium, with every request it made and every console error."""

    def __init__(self, context, url):
        self.page = context.new_page()
        self.requests = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.console = b.ConsoleLog(self.page, "site")
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle")

    def offsite(self):
        return [u for u in self.requests if urlparse(u).scheme not in ("data", "blob")
                and urlparse(u).hostname not in ("127.0.0.1", "localhost")]


@pytest.fixture(scope="module")
def visited(chromium, served):
    """visited(path): the site's page `path` (without .html) loaded once in Chromium and kept open, so that the
    tests that read a loaded page (the lesson pages', axe-core's) share one load of it."""
    visits = {}

    def visit(path):
        if path not in visits:
            visits[path] = Visit(chromium, f"{served}/{path}.html")
        return visits[path]
    yield visit
    for v in visits.values():
        v.page.close()


IMAGES_JS = """async () => {
  const imgs = [...document.images];
  for (const img of imgs) { img.loading = 'eager'; img.scrollIntoView(); }
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return imgs.map(i => ({src: i.getAttribute('src'), width: i.naturalWidth}));
}"""

MATH_JS = """async () => {
  if (!window.MathJax || !MathJax.startup) return {maths: document.querySelectorAll('.math').length, typeset: -1};
  await MathJax.startup.promise;
  const maths = [...document.querySelectorAll('.math')];
  return {maths: maths.length, typeset: maths.filter(m => m.querySelector('mjx-container')).length,
          errors: document.querySelectorAll('mjx-merror').length};
}"""


@needs_browser
@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_page_in_chromium_loads_offline_with_images_and_typeset_math(visited, artifacts, lesson):
    visit = visited(f"lessons/{lesson}")
    try:
        images = visit.page.evaluate(IMAGES_JS)
        math = visit.page.evaluate(MATH_JS)
        visit.page.evaluate("window.scrollTo(0, 0)")
        visit.page.screenshot(path=str(artifacts / f"{lesson}_top.png"))
        figure = visit.page.locator("article.bd-article img[src*='_images/'][src$='.png']").first
        figure.scroll_into_view_if_needed()
        figure.screenshot(path=str(artifacts / f"{lesson}_first_figure.png"))
        if math["maths"]:
            formula = visit.page.locator("article.bd-article .math mjx-container").first
            formula.scroll_into_view_if_needed()
            visit.page.screenshot(path=str(artifacts / f"{lesson}_math.png"))
    finally:
        (artifacts / f"{lesson}_console.log").write_text("\n".join(visit.console.messages))
    assert visit.console.errors == [], visit.console.errors
    assert visit.offsite() == [], f"requests leaving localhost: {visit.offsite()}"
    assert images and all(i["width"] > 0 for i in images), [i for i in images if i["width"] == 0]
    assert sum("_images/" in i["src"] and i["src"].endswith(".png") for i in images) >= 1, "no figure"
    markdown = "\n".join(c.source for c in load(SOLUTIONS / f"{lesson}.ipynb").cells if c.cell_type == "markdown")
    if "$" in markdown:
        assert math["maths"] > 0, "the lesson's math did not reach the page"
        assert math["typeset"] == math["maths"] and math["errors"] == 0, f"math not typeset by MathJax: {math}"


WCAG_A_AA = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
             "resultTypes": ["violations"]}


AXE = Path(__file__).with_name("axe-core-4.14.1.min.js")  # Deque's axe-core (MPL 2.0), from npm, kept here: no network


# JavaScript: wait until the page's colours are the ones a reader sees, which is what axe-core's colour-contrast
# rule reads: every linked stylesheet loaded and parsed, every <style> sheet in place, the fonts loaded, MathJax's
# typesetting (which adds its own styles and moves the text below it) done, no transition or animation half-way,
# the page at its top (the theme's back-to-top button hidden), and the layout unchanged over two frames.
# Returns what it waited for, for the failure message.
SETTLED_JS = """async () => {
  const links = [...document.querySelectorAll('link[rel~="stylesheet"]')];
  await Promise.all(links.map(l => {
    try { if (l.sheet && l.sheet.cssRules) return null; } catch (e) { return null; }  // loaded (another origin's rules hidden)
    return new Promise(r => { l.addEventListener('load', r, {once: true}); l.addEventListener('error', r, {once: true}); });
  }));
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { transition: none !important; animation: none !important; }';
  document.head.appendChild(style);
  for (const a of document.getAnimations()) { try { a.finish(); } catch (e) { a.cancel(); } }
  window.scrollTo(0, 0);
  window.dispatchEvent(new Event('scroll'));
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const layout = () => JSON.stringify([document.documentElement.scrollHeight, document.documentElement.scrollWidth,
    window.scrollY, document.styleSheets.length, document.documentElement.dataset.theme || null]);
  let last = null, frames = 0;
  for (; frames < 100; frames++) {
    await frame();
    const now = layout();
    if (now === last) break;
    last = now;
  }
  await document.fonts.ready;
  return {sheets: links.length, loaded: links.filter(l => l.sheet).length, frames, layout: last};
}"""


def _axe(visit, options):
    if not visit.page.evaluate("() => !!window.axe"):
        visit.page.add_script_tag(path=str(AXE))
    return visit.page.evaluate("options => axe.run(document, options)", options)["violations"]


def _described(violations):
    """Each violation's rule, impact and first nodes, with the colours axe read for a contrast one."""
    return [(v["id"], v["impact"], [(n["target"], {k: n["any"][0]["data"].get(k) for k in ("fgColor", "bgColor",
                                                                                            "contrastRatio")}
                                     if v["id"] == "color-contrast" and n["any"] and
                                     isinstance(n["any"][0].get("data"), dict) else None)
                                    for n in v["nodes"][:3]]) for v in violations]


@needs_browser
@pytest.mark.parametrize("page", ["index"] + [f"lessons/{lesson}" for lesson in LESSONS]
                         + [f"manual/{name}" for name in site.MANUAL])
def test_every_page_passes_axe_cores_wcag_a_and_aa_rules(visited, page):
    """On a settled page (SETTLED_JS)."""
    visit = visited(page)
    settled = visit.page.evaluate(SETTLED_JS)
    violations = _axe(visit, WCAG_A_AA)
    assert not violations, (_described(violations), settled)


def _contrast(fg, bg):
    """WCAG 2's contrast ratio of two colours '#rrggbb'."""
    def luminance(colour):
        rgb = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted([luminance(fg), luminance(bg)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_code_keeps_aa_contrast_in_the_style_sphinx_writes_before_the_themes(html_dir):
    """Every build writes _static/pygments.css twice: first in site/conf.py's pygments_style, then in the theme's light
    and dark styles. A page read between the two (a run beside another build of the folder) showed the first: with
    the theme's own choice, tango, strings at 3.2:1. Every token colour of the first style must pass AA (4.5:1) on
    the code's backgrounds: the style's own and the theme's surface, which the page shows behind code."""
    import runpy
    from pygments.styles import get_style_by_name
    conf = runpy.run_path(str(REPO / "site" / "conf.py"))
    style = get_style_by_name(conf["pygments_style"])
    theme_css = (html_dir / "_static" / "styles" / "pydata-sphinx-theme.css").read_text()
    surface = re.search(r"html\[data-theme=light\]\{[^}]*--pst-color-surface:(#[0-9a-f]{6})", theme_css).group(1)
    backgrounds = {style.background_color, surface}
    low = sorted({(str(token), f"#{d['color']}", bg, round(_contrast(f"#{d['color']}", bg), 2))
                  for token, d in style if d["color"] for bg in backgrounds if _contrast(f"#{d['color']}", bg) < 4.5})
    assert conf["pygments_style"] == conf["html_theme_options"]["pygments_light_style"]
    assert not low, f"{conf['pygments_style']}: token colours below AA on a code background: {low[:5]}"


@needs_browser
def test_next_and_previous_links_walk_the_lessons_and_the_manual_in_order(chromium, served, artifacts):
    visit = Visit(chromium, f"{served}/index.html")
    page = visit.page
    try:
        page.screenshot(path=str(artifacts / "index.png"))
        order = ["index"] + [f"lessons/{lesson}" for lesson in LESSONS] + [f"manual/{name}" for name in site.MANUAL]
        # each link is followed as soon as its page's links exist (DOMContentLoaded): loading every page in full
        # (images, MathJax's typesetting) is the lesson pages' own test; waiting for it here made the walk 33 s, not 21
        for here, there in zip(order, order[1:]):  # forward with "next", as a reader clicks
            with page.expect_navigation(wait_until="domcontentloaded"):
                page.locator("a.right-next").click()
            assert urlparse(page.url).path == f"/{there}.html", f"next from {here} went to {page.url}"
        for here, there in zip(order[::-1], order[::-1][1:]):  # and back with "previous"
            with page.expect_navigation(wait_until="domcontentloaded"):
                page.locator("a.left-prev").click()
            assert urlparse(page.url).path == f"/{there}.html", f"previous from {here} went to {page.url}"
    finally:
        page.close()
    assert visit.console.errors == [] and visit.offsite() == [], (visit.console.errors, visit.offsite())


@needs_browser
def test_the_search_box_finds_a_term_of_lesson_03(chromium, served, artifacts):
    if SEARCH_LESSON not in LESSONS:
        pytest.skip(f"no {SEARCH_LESSON}")
    visit = Visit(chromium, f"{served}/index.html")
    page = visit.page
    try:
        page.locator("button.search-button__button:visible").first.click()
        box = page.locator("#pst-search-dialog input[name='q'], form.bd-search input[name='q']").first
        box.wait_for(state="visible")
        box.fill(SEARCH_TERM)
        box.press("Enter")
        page.wait_for_url("**/search.html?q=*")
        hit = page.locator(f"#search-results a[href*='{SEARCH_LESSON}']").first
        hit.wait_for(timeout=30_000)
        page.screenshot(path=str(artifacts / "search.png"))
        hit.click()
        page.wait_for_load_state("networkidle")
        assert f"/lessons/{SEARCH_LESSON}.html" in page.url
    finally:
        page.close()
    assert visit.console.errors == [] and visit.offsite() == [], (visit.console.errors, visit.offsite())


# ---------------------------------------------------------------- the repository's address, from origin

def _course_copy(tmp_path, lesson):
    """A git repository holding what `--from-origin` touches: pyproject, README, tools, autograder, one lesson."""
    root = tmp_path / "fork"
    (root / "solutions").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / name, root / name)
    for folder in ("tools", "autograder"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(SOLUTIONS / f"{lesson}.ipynb", root / "solutions" / f"{lesson}.ipynb")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _from_origin(root, origin):
    subprocess.run(["git", "remote", "remove", "origin"], cwd=root, capture_output=True)
    subprocess.run(["git", "remote", "add", "origin", origin], cwd=root, check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "tools.colab", "--from-origin"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_from_origin_points_every_badge_at_the_fork(tmp_path):
    lesson = LESSONS[0]
    root = _course_copy(tmp_path, lesson)
    result = _from_origin(root, "git@github.com:someone/attention-fork.git")
    assert result.returncode == 0, result.stdout + result.stderr
    fork = "https://github.com/someone/attention-fork"
    assert f'repository = "{fork}"' in (root / "pyproject.toml").read_text()
    for folder in ("solutions", "notebooks"):
        nb = load(root / folder / f"{lesson}.ipynb")
        badge = nb.cells[0].source
        assert f"colab.research.google.com/github/someone/attention-fork/blob/main/notebooks/{lesson}.ipynb" in badge
        setup = next(c for c in nb.cells if c.get("id") == colab.SETUP_ID)
        assert f"git+{fork}@main" in setup.source
    readme = (root / "README.md").read_text()
    assert colab.REPO_URL not in readme and colab.GITHUB_PATH not in readme
    assert f"/github/someone/attention-fork/blob/main/notebooks/{lesson}.ipynb" in readme
    # the one place: every other line of pyproject.toml is as it was
    before, after = (REPO / "pyproject.toml").read_text().splitlines(), (root / "pyproject.toml").read_text().splitlines()
    assert [(a, c) for a, c in zip(before, after) if a != c] == [(f'repository = "{colab.REPO_URL}"',
                                                                   f'repository = "{fork}"')]
    again = _from_origin(root, "https://github.com/someone/attention-fork.git")
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_from_origin_refuses_a_remote_colab_cannot_open(tmp_path):
    root = _course_copy(tmp_path, LESSONS[0])
    result = _from_origin(root, "https://gitlab.com/someone/attention-fork.git")
    assert result.returncode == 1 and "not a GitHub repository" in result.stderr
    assert (root / "pyproject.toml").read_text() == (REPO / "pyproject.toml").read_text()
