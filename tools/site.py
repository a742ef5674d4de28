"""The course as a static website: every lesson with the outputs of a full-mode run, and no answers.

    python -m tools.site build            # build/site/html (full mode; re-runs only changed lessons)
    python -m tools.site build --fast     # build/site-fast/html, in fast mode (quick check; numbers meaningless)
    python -m http.server -d build/site/html   # then open http://localhost:8000

For each solutions/NN_*.ipynb (whatever lessons exist):

1. run the solution notebook (COURSE_FAST=0), or take the run from build/site-cache/
   when the notebook and course_utils are unchanged since it was made;
2. turn it into the student's page: every solution cell and test cell gets the
   source of the student copy in notebooks/ (the stub; visible tests only), the
   outputs of solution cells are dropped, a test cell keeps only what it printed
   to stdout (its pass message), and no error output survives anywhere;
3. replace each explorer (an ipywidgets view: it needs a kernel) by its first
   picture, captured from the widget state of the run, with a note saying how to
   open the lesson live; point the Colab badge at the site's own copy of its image;
4. refuse to go on if any line of a solution or of a hidden test is still in the page;
5. add the manual's pages from docs/ (the instructor's manual, the design, the test suite);
6. build the HTML with Sphinx and MyST-NB (configuration in site/conf.py).
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

from autograder.cells import grade_id, is_answer, is_test, nbgrader
from autograder.cells import secret_lines as secret_lines_of
from tools import colab

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
SITE_CONFIG = REPO / "site"
CACHE = REPO / "build" / "site-cache"
COURSE_UTILS = REPO / "course_utils"
DOCS = REPO / "docs"
# the manual's pages, from docs/, in the order of the site's second table of contents
MANUAL = ("instructors", "design", "testing")
# bump when what a cached run contains changes (how notebooks are executed)
RECIPE = "site-run-1"


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
BADGE_IMAGE = "colab-badge.svg"


class SiteError(Exception):
    """The site cannot be built as asked (a stale student copy, a failing lesson, an answer in a page)."""


def lessons():
    return sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.ipynb"))


def output_dir(fast):
    return REPO / "build" / ("site-fast" if fast else "site")


# ---------------------------------------------------------------- 1. running the solutions, cached

def cache_key(lesson, fast):
    """Hash of what a run depends on: the solution notebook, course_utils' sources and the mode."""
    digest = hashlib.sha256(f"{RECIPE}\nfast={fast}\n".encode())
    digest.update((SOLUTIONS / f"{lesson}.ipynb").read_bytes())
    for path in sorted(COURSE_UTILS.rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cached_run_path(lesson, fast):
    return CACHE / ("fast" if fast else "full") / f"{lesson}.ipynb"


def cached_run(lesson, fast):
    """The cached executed solution notebook, or None when there is none for the current sources."""
    path = cached_run_path(lesson, fast)
    if not path.exists():
        return None
    nb = nbformat.read(str(path), as_version=4)
    return nb if nb.metadata.get("course_site", {}).get("key") == cache_key(lesson, fast) else None


def execute_lesson(lesson, fast, threads=None, timeout=900):
    """Run solutions/<lesson>.ipynb top to bottom in a fresh kernel; store the run in the cache.

    Runs in a worker process (its environment is the kernel's). Raises SiteError when a cell fails:
    a page must not show a traceback.
    """
    from autograder.nbrun import NotebookClient

    key = cache_key(lesson, fast)
    nb = nbformat.read(str(SOLUTIONS / f"{lesson}.ipynb"), as_version=4)
    os.environ.update(COURSE_FAST="1" if fast else "0", MPLBACKEND="module://matplotlib_inline.backend_inline")
    if threads:  # this worker process's environment only, inherited by its kernel
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, str(threads))
    started = time.time()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True, store_widget_state=True,
                   resources={"metadata": {"path": str(REPO)}}).execute()
    failed = [(i, o.ename, o.evalue) for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    if failed:
        raise SiteError(f"solutions/{lesson}.ipynb fails when run (cell, error): {failed}")
    nb.metadata["course_site"] = {"key": key, "fast": fast, "seconds": round(time.time() - started, 1)}
    path = cached_run_path(lesson, fast)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    nbformat.write(nb, str(tmp))
    tmp.replace(path)
    return lesson, nb.metadata["course_site"]["seconds"]


def run_lessons(names, fast, jobs, log=print):
    """Executed solution notebooks {lesson: nb}, re-running only those whose cache is stale. One process at a time
    runs a mode's lessons: another (the test suite's other worker, a second build) waits, then reads the cache."""
    import fcntl
    lock = CACHE / f"{'fast' if fast else 'full'}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        return _run_lessons(names, fast, jobs, log)


def _run_lessons(names, fast, jobs, log):
    runs = {name: cached_run(name, fast) for name in names}
    stale = [name for name, nb in runs.items() if nb is None]
    for name in names:
        if runs[name] is not None:
            log(f"  {name}: cached run ({runs[name].metadata['course_site']['seconds']} s when made)")
    if stale:
        log(f"  running {len(stale)} lesson(s) in {'fast' if fast else 'full'} mode, {jobs} at a time: "
            f"{', '.join(stale)}")
        workers = max(1, min(jobs, len(stale)))
        # each kernel's torch gets its share of the cores instead of all of them
        threads = max(1, (os.cpu_count() or 1) // workers) if workers > 1 else None
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(execute_lesson, name, fast, threads) for name in stale]
            for future in futures:
                name, seconds = future.result()
                log(f"  {name}: ran in {seconds} s")
                runs[name] = nbformat.read(str(cached_run_path(name, fast)), as_version=4)
    return runs


# ---------------------------------------------------------------- 2. the student's page

def secret_lines(solution_nb, public_nbs=()):
    """Lines that the site must never show: solution bodies and hidden tests.

    The lines of every cell's solution and hidden-test regions (autograder.cells.secret_lines: stripped, at
    least cells.MIN_SECRET_LINE characters), less those found in a published notebook (`public_nbs`: the
    student copies, such as `if mask is not None:` in a docstring, a line a visible test shares, or an
    earlier lesson's answer given as ready-made code).
    """
    public_text = "\n".join(c.source for nb in public_nbs for c in nb.cells)
    found = []
    for cell in solution_nb.cells:
        for text in secret_lines_of(cell.source, solutions=True):
            if text not in public_text and text not in found:
                found.append(text)
    return found


def student_page(run, student, lesson):
    """The executed solution notebook turned into what a student sees, with the run's outputs."""
    page = nbformat.from_dict(json.loads(json.dumps(run)))
    released = {grade_id(c): c for c in student.cells if grade_id(c)}
    widget_state = page.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    fast = page.metadata.pop("course_site", {}).get("fast", False)
    cells = []
    for cell in page.cells:
        gid = grade_id(cell)
        if is_answer(cell) or is_test(cell):
            if gid not in released:
                raise SiteError(f"notebooks/{lesson}.ipynb has no cell '{gid}': the student copy is stale; "
                                f"run `python -m autograder release {lesson}`")
            cell.source = released[gid].source
        if cell.cell_type == "code":
            if is_answer(cell):
                cell.outputs = []
            elif is_test(cell):  # the pass message only: nothing a hidden test printed or raised
                cell.outputs = [o for o in cell.outputs if o.output_type == "stream" and o.name == "stdout"]
                cell.outputs = cell.outputs[:1]
            else:
                cell.outputs = [o for o in cell.outputs if o.output_type != "error"]
            cell.execution_count = None
            cell.metadata.pop("execution", None)
        cells.append(cell)
        if cell.cell_type == "code" and any(WIDGET_VIEW in o.get("data", {}) for o in cell.outputs):
            explorer = any(is_explorer(o, widget_state) for o in cell.outputs)
            cell.outputs = static_widgets(cell.outputs, widget_state)
            if explorer:
                if not cell.outputs:
                    raise SiteError(f"an explorer of {lesson} showed nothing when the lesson was run: "
                                    f"its first picture cannot be put on the site")
                cells.append(explorer_note(lesson, fast))
    page.cells = cells
    for cell in page.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if colab.BADGE_ID in tags:  # the badge's image from the site itself; the link still opens Colab
            cell.source = cell.source.replace(colab.BADGE_IMAGE, BADGE_IMAGE)
        if colab.SETUP_ID in tags:  # does something on Colab only: not part of the reading
            cell.metadata["tags"] = tags + ["remove-cell"]
    return page


def _widget_pictures(model_id, state, seen):
    """Depth first through a widget's children: HTML values and Output widgets' outputs, in order."""
    if model_id in seen or model_id not in state:
        return []
    seen.add(model_id)
    model = state[model_id]
    found = []
    if model.get("model_name") == "HTMLModel" and model["state"].get("value"):
        found.append(nbformat.v4.new_output("display_data", data={"text/html": model["state"]["value"]}))
    if model.get("model_name") == "OutputModel":
        for out in model["state"].get("outputs", []):
            data = {k: v for k, v in out.get("data", {}).items() if k in ("image/png", "image/svg+xml",
                                                                         "text/html", "text/plain")}
            if out.get("output_type") in ("display_data", "execute_result") and data:
                found.append(nbformat.v4.new_output("display_data", data=data))
            elif out.get("output_type") == "stream" and out.get("name") == "stdout":  # a printed line
                found.append(nbformat.v4.new_output("stream", name="stdout", text=out.get("text", "")))
    if model.get("model_name") == "ImageModel" and model["state"].get("value"):
        value = model["state"]["value"]
        if isinstance(value, str):
            found.append(nbformat.v4.new_output("display_data", data={"image/png": value}))
    for child in model["state"].get("children", []) or []:
        found += _widget_pictures(str(child).removeprefix("IPY_MODEL_"), state, seen)
    return found


# widgets a reader moves: a view holding one of them is an explorer (a progress bar is not)
CONTROL = re.compile(r"\w*(Slider|Dropdown|Text|Textarea|Button|ToggleButtons?|Checkbox|RadioButtons|Select|"
                     r"SelectMultiple|Play|Combobox|Picker)Model")


def _descendants(model_id, state, seen=None):
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in state:
        return seen
    seen.add(model_id)
    for child in state[model_id]["state"].get("children", []) or []:
        _descendants(str(child).removeprefix("IPY_MODEL_"), state, seen)
    return seen


def is_explorer(output, widget_state):
    view = output.get("data", {}).get(WIDGET_VIEW)
    return view is not None and any(CONTROL.fullmatch(widget_state[m].get("model_name", ""))
                                    for m in _descendants(view["model_id"], widget_state))


def static_widgets(outputs, widget_state):
    """Outputs with each widget view replaced by what it showed when the run ended (HTML and figures).

    An explorer's view becomes its first picture (nothing moved its controls); a progress bar its text.
    """
    static = []
    for out in outputs:
        view = out.get("data", {}).get(WIDGET_VIEW)
        if view is None:
            static.append(out)
        else:
            static += _widget_pictures(view["model_id"], widget_state, set())
    return static


def explorer_note(lesson, fast=False):
    cell = nbformat.v4.new_markdown_cell(
        '<div class="course-explorer-note">\n\n'
        f"**This explorer needs a running kernel.** Above is its first picture, from a {'fast-mode' if fast else 'full'} "
        "run of the lesson. To move its controls, open the lesson live: "
        f"[![Open In Colab]({BADGE_IMAGE})]({colab.colab_url(lesson)}) or, on your machine, "
        f"`jupyter lab notebooks/{lesson}.ipynb` (see the README's set-up).\n\n</div>")
    cell.metadata["tags"] = ["course-explorer-note"]
    return cell


def page_text(nb):
    """Every source and text output of a notebook, for the answer check."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts += [v for k, v in out.get("data", {}).items() if k.startswith("text/") and isinstance(v, str)]
            parts += out.get("traceback", [])
    return "\n".join(parts)


def leaked_lines(text, secrets):
    """The secret lines found in `text`, whitespace-insensitively."""
    flat = re.sub(r"\s+", " ", text)
    return [s for s in secrets if re.sub(r"\s+", " ", s) in flat]


# ---------------------------------------------------------------- 3. the Sphinx project

INDEX = """\
# Attention, from the bottleneck up

An open, autograded course on attention in deep learning. Each lesson below is
shown as a student gets it (the exercises are left for you to write) with the
figures, measurements and tables of a full run of the finished lesson, so that
you can read it before running anything.

To work through a lesson, open it live: each lesson's **Open in Colab** badge,
or on your own machine (see the README's set-up)

```bash
python -m pip install -r requirements.txt
jupyter lab notebooks/
```

The explorers at the end of each lesson need a running kernel: here they show
their first picture.

Teaching with the course? The instructor's manual, at the end of the contents,
takes you from the release to the grades; the design and the test suite's pages
are for course authors.

```{{toctree}}
:maxdepth: 1
:caption: Lessons

{entries}
```

```{{toctree}}
:maxdepth: 1
:caption: For instructors and course authors

{manual}
```
"""


def write_if_changed(path, text):
    """Write only when the content differs, so that Sphinx rebuilds only the pages that changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def prepare_sources(pages, src, fast):
    """The Sphinx source folder: site/'s files, an index and one notebook per lesson.

    Returns True when a lesson was removed since the last build: Sphinx would leave its old page behind.
    """
    src.mkdir(parents=True, exist_ok=True)
    for item in SITE_CONFIG.iterdir():
        if item.name == "__pycache__":
            continue
        target = src / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            write_if_changed(target, item.read_text())
    lessons_dir = src / "lessons"
    lessons_dir.mkdir(exist_ok=True)
    removed = False
    for stale in lessons_dir.glob("*.ipynb"):
        if stale.stem not in pages:
            stale.unlink()
            removed = True
    for lesson, nb in pages.items():
        write_if_changed(lessons_dir / f"{lesson}.ipynb", nbformat.writes(nb) + "\n")
    write_if_changed(lessons_dir / BADGE_IMAGE, (SITE_CONFIG / BADGE_IMAGE).read_text())
    for name in MANUAL:
        write_if_changed(src / "manual" / f"{name}.md", (DOCS / f"{name}.md").read_text())
    index = INDEX.format(entries="\n".join(f"lessons/{lesson}" for lesson in pages),
                         manual="\n".join(f"manual/{name}" for name in MANUAL))
    if fast:
        index = index.replace("a full run of the finished lesson", "a FAST-MODE run of the finished lesson "
                              "(its numbers are meaningless: a quick check of the site only)")
    write_if_changed(src / "index.md", index)
    return removed


def sphinx_build(src, html, doctrees, log):
    argv = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-d", str(doctrees),
            str(src), str(html)]
    result = subprocess.run(argv, cwd=str(REPO), capture_output=True, text=True)
    if result.stdout.strip():
        log(result.stdout.rstrip())
    if result.returncode != 0:
        raise SiteError(f"sphinx-build failed ({result.returncode}):\n{result.stderr}")


# ---------------------------------------------------------------- the command

def build(fast=False, jobs=2, names=None, log=print):
    """Build the site; returns the folder of its HTML (build/site/html, or build/site-fast/html)."""
    started = time.time()
    names = names or lessons()
    if not names:
        raise SiteError("no lesson in solutions/")
    log(f"site: {len(names)} lesson(s), {'fast' if fast else 'full'} mode")
    runs = run_lessons(names, fast, jobs, log)
    pages = {}
    for lesson in names:
        student_path = NOTEBOOKS / f"{lesson}.ipynb"
        if not student_path.exists():
            raise SiteError(f"{student_path.relative_to(REPO)} is missing: run `python -m autograder release {lesson}`")
        student = nbformat.read(str(student_path), as_version=4)
        page = student_page(runs[lesson], student, lesson)
        solution = nbformat.read(str(SOLUTIONS / f"{lesson}.ipynb"), as_version=4)
        leaks = leaked_lines(page_text(page), secret_lines(solution, [student]))
        if leaks:
            raise SiteError(f"the page of {lesson} would show {len(leaks)} line(s) of a solution or hidden test, "
                            f"e.g. {leaks[0]!r}: is notebooks/{lesson}.ipynb stale? "
                            f"run `python -m autograder release {lesson}`")
        pages[lesson] = page
    out = output_dir(fast)
    removed = prepare_sources(pages, out / "src", fast)
    html = out / "html"
    if removed or any(p.stem not in pages for p in html.glob("lessons/*.html")):
        shutil.rmtree(html, ignore_errors=True)  # no page of a lesson that is not built this time
        shutil.rmtree(out / "doctrees", ignore_errors=True)
    sphinx_build(out / "src", html, out / "doctrees", log)
    log(f"site: {out / 'html' / 'index.html'} in {time.time() - started:.0f} s")
    return out / "html"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.site", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the site (re-runs only the lessons that changed)")
    b.add_argument("lessons", nargs="*", help="lesson ids (default: every solutions/NN_*.ipynb)")
    b.add_argument("--fast", action="store_true",
                   help="fast mode (COURSE_FAST=1) into build/site-fast: a quick check, numbers meaningless")
    b.add_argument("--jobs", type=int, default=2, help="lessons run at the same time (default 2)")
    args = parser.parse_args(argv)
    try:
        html = build(fast=args.fast, jobs=args.jobs, names=args.lessons or None)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"serve it with: python -m http.server -d {html.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
