"""Google Colab: the repository's address, the "Open in Colab" badge and the Colab set-up cell.

Everything that names the repository is stamped from the constants below, so
moving the repository means changing them here and re-running

    python -m tools.colab                 # stamp every solutions/*.ipynb (idempotent)
    python -m tools.colab 01_seq2seq_bottleneck   # or only the lessons named
    python -m autograder release          # regenerate notebooks/ from solutions/

`python -m tools.colab --check` stamps nothing and exits 1 when a solution
notebook's badge or set-up cell is missing or out of date (tests/test_colab.py
checks the same for solutions/ and notebooks/). `python -m tools.colab --readme`
prints the README's lesson-table badges.

Each notebook gets two cells, recognised by their cell ids (and tags):

* `colab-badge`: a markdown cell at the very top with the badge, which opens
  the *student* notebook (notebooks/NN_x.ipynb) in Colab;
* `colab-setup`: a plain code cell (no nbgrader metadata: unlocked, ungraded,
  kept by nbgrader) just before the notebook's first code cell. On Colab
  (`google.colab` in sys.modules) it pip-installs course_utils from the
  repository with --no-deps, so Colab's own torch, numpy, matplotlib and
  ipywidgets are never touched (tqdm, the one other dependency, is on Colab
  already). Anywhere else it does nothing and prints nothing.
"""
import argparse
import sys
from pathlib import Path

import nbformat

# The one place that says where the course lives.
REPO_URL = "https://github.com/attention-course/attention-from-the-bottleneck-up"
BRANCH = "main"

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"

GITHUB_PATH = REPO_URL.removeprefix("https://github.com/")  # owner/name
COLAB_BASE = f"https://colab.research.google.com/github/{GITHUB_PATH}/blob/{BRANCH}/"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
PIP_TARGET = f"course-utils @ git+{REPO_URL}@{BRANCH}"

BADGE_ID = "colab-badge"
SETUP_ID = "colab-setup"


def colab_url(lesson, folder="notebooks"):
    """The Colab address that opens <folder>/<lesson>.ipynb from the repository."""
    return f"{COLAB_BASE}{folder}/{lesson}.ipynb"


def badge_markdown(lesson):
    """The badge as markdown (also used in the README's lesson table)."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(lesson)})"


def badge_source(lesson):
    return badge_markdown(lesson)


def setup_source():
    """The Colab set-up cell: plain Python (no magics), silent and inert off Colab."""
    return f'''\
# Set-up for Google Colab only: install the course's helper package, course_utils,
# from the course repository. --no-deps keeps Colab's own torch, numpy, matplotlib
# and ipywidgets exactly as they are. Anywhere else this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import importlib
    import subprocess

    course_utils_source = "{PIP_TARGET}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", course_utils_source],
                   check=True)
    importlib.invalidate_caches()'''


def _badge_cell(lesson):
    cell = nbformat.v4.new_markdown_cell(badge_source(lesson))
    cell["id"] = BADGE_ID
    cell.metadata["tags"] = [BADGE_ID]
    return cell


def _setup_cell():
    cell = nbformat.v4.new_code_cell(setup_source())
    cell["id"] = SETUP_ID
    cell.metadata["tags"] = [SETUP_ID]
    return cell


def _role(cell):
    tags = cell.get("metadata", {}).get("tags", [])
    for role in (BADGE_ID, SETUP_ID):
        if cell.get("id") == role or role in tags:
            return role
    return None


def stamp(nb, lesson):
    """Return True if `nb` changed: (re)insert the badge at the top and the set-up cell before the first code cell."""
    before = nbformat.writes(nb)
    cells = [c for c in nb.cells if _role(c) is None]
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    cells.insert(first_code, _setup_cell())
    cells.insert(0, _badge_cell(lesson))
    nb.cells = cells
    if nb.get("nbformat_minor", 0) < 5:  # cell ids need nbformat 4.5
        nb.nbformat_minor = 5
    nbformat.validate(nb)
    return nbformat.writes(nb) != before


def problems(nb, lesson):
    """What is wrong with a notebook's badge and set-up cell (empty list: nothing)."""
    found = []
    badges = [c for c in nb.cells if _role(c) == BADGE_ID]
    setups = [c for c in nb.cells if _role(c) == SETUP_ID]
    if len(badges) != 1:
        found.append(f"expected one '{BADGE_ID}' cell, found {len(badges)}")
    elif nb.cells[0] is not badges[0]:
        found.append("the Colab badge is not the first cell")
    elif badges[0].cell_type != "markdown" or badges[0].source != badge_source(lesson):
        found.append(f"the badge differs from tools/colab.py's: {badges[0].source!r}")
    if len(setups) != 1:
        found.append(f"expected one '{SETUP_ID}' cell, found {len(setups)}")
    else:
        setup = setups[0]
        first_code = next(c for c in nb.cells if c.cell_type == "code")
        if setup is not first_code:
            found.append("the Colab set-up cell is not the first code cell")
        if setup.cell_type != "code" or setup.source != setup_source():
            found.append("the Colab set-up cell differs from tools/colab.py's")
        nbg = setup.metadata.get("nbgrader", {})
        if nbg.get("solution") or nbg.get("grade") or nbg.get("locked"):
            found.append(f"the Colab set-up cell must be a plain cell, not nbgrader {nbg}")
    return found


def lessons(folder=SOLUTIONS):
    return sorted(p.stem for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))


def readme_rows():
    return "\n".join(f"{lesson}: {badge_markdown(lesson)}" for lesson in lessons())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.colab", description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson ids (default: every solutions/*.ipynb)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook needs stamping")
    parser.add_argument("--readme", action="store_true", help="print the badges for the README's lesson table")
    args = parser.parse_args(argv)
    if args.readme:
        print(readme_rows())
        return 0
    bad = 0
    for lesson in args.lessons or lessons():
        path = SOLUTIONS / f"{lesson}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        if args.check:
            for problem in problems(nb, lesson):
                print(f"{path.relative_to(REPO)}: {problem}")
                bad += 1
            continue
        if stamp(nb, lesson):
            nbformat.write(nb, str(path))
            print(f"stamped {path.relative_to(REPO)}")
        else:
            print(f"up to date {path.relative_to(REPO)}")
    if args.check and bad:
        print("run `python -m tools.colab && python -m autograder release`")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
