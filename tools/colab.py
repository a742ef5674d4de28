"""Google Colab: the repository's address, the "Open in Colab" badge and the Colab set-up cell.

Everything that names the repository is stamped from one setting, `repository`
in pyproject.toml's `[tool.course]` table (read into REPO_URL below; the website
reads it too). A fork gets working badges in one step:

    python -m tools.colab --from-origin   # set it from `git remote get-url origin`, re-stamp
                                          # solutions/, the README's table, and release notebooks/

or, after changing the setting by hand:

    python -m tools.colab                 # stamp every solutions/*.ipynb (idempotent)
    python -m tools.colab 01_seq2seq_bottleneck   # or only the lessons named
    python -m autograder release          # regenerate notebooks/ from solutions/

`python -m tools.colab --check` stamps nothing and exits 1 when a solution
notebook's badge or set-up cell is missing or out of date (tests/site/test_colab.py
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
import re
import subprocess
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = REPO / "pyproject.toml"
README = REPO / "README.md"


def configured_repository(pyproject=PYPROJECT):
    """The course's GitHub address: `repository` in pyproject.toml's [tool.course] (the one place)."""
    with open(pyproject, "rb") as f:
        url = tomllib.load(f).get("tool", {}).get("course", {}).get("repository")
    if not url or not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"{pyproject}: [tool.course] repository must be https://github.com/OWNER/NAME, "
                         f"not {url!r}")
    return url


REPO_URL = configured_repository()
BRANCH = "main"

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
    """BADGE_ID or SETUP_ID for a badge or set-up cell (by id, tag, or a copy of the source made elsewhere), else None."""
    tags = cell.get("metadata", {}).get("tags", [])
    for role in (BADGE_ID, SETUP_ID):
        if cell.get("id") == role or role in tags:
            return role
    source = cell.get("source", "")
    if cell.get("cell_type") == "code" and source.startswith(setup_source().splitlines()[0]):
        return SETUP_ID
    if cell.get("cell_type") == "markdown" and source.strip().startswith(f"[![Open In Colab]({BADGE_IMAGE})]"):
        return BADGE_ID
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


def github_url(remote):
    """https://github.com/OWNER/NAME for a GitHub remote in any of git's spellings; ValueError otherwise."""
    match = re.fullmatch(r"(?:https?://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com/|"
                         r"git://github\.com/)([\w.-]+)/([\w.-]+?)(?:\.git)?/?", remote.strip())
    if not match:
        raise ValueError(f"origin is {remote.strip()!r}, not a GitHub repository: Colab opens notebooks "
                         f"from GitHub only")
    return f"https://github.com/{match[1]}/{match[2]}"


def set_repository(url, pyproject=PYPROJECT):
    """Rewrite `repository = "..."` in pyproject.toml's [tool.course] table (nothing else changes)."""
    text = Path(pyproject).read_text()
    table = re.search(r"^\[tool\.course\]\n(?:(?!\[).*\n?)*", text, re.M)
    if not table or not re.search(r'^repository\s*=\s*".*"$', table[0], re.M):
        raise ValueError(f"{pyproject} has no `repository = ...` in a [tool.course] table")
    body = re.sub(r'^repository\s*=\s*".*"$', f'repository = "{url}"', table[0], count=1, flags=re.M)
    Path(pyproject).write_text(text[:table.start()] + body + text[table.end():])


def from_origin(repo=REPO):
    """Set the course's address from the origin remote and re-stamp everything that names it."""
    remote = subprocess.run(["git", "remote", "get-url", "origin"], cwd=repo, capture_output=True, text=True)
    if remote.returncode != 0:
        print(f"error: no origin remote: {remote.stderr.strip()}", file=sys.stderr)
        return 1
    try:
        url = github_url(remote.stdout)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    old = configured_repository(repo / "pyproject.toml")
    if url == old:
        print(f"the course already lives at {url}: nothing to do")
        return 0
    set_repository(url, repo / "pyproject.toml")
    readme = repo / "README.md"
    if readme.exists():  # the lesson table's badges and links
        old_path, new_path = old.removeprefix("https://github.com/"), url.removeprefix("https://github.com/")
        readme.write_text(readme.read_text().replace(f"/github/{old_path}/", f"/github/{new_path}/")
                          .replace(old, url))
    print(f"repository: {old} -> {url}")
    # a fresh interpreter reads the new address; then the student copies are regenerated from solutions/
    for step in (["-m", "tools.colab"], ["-m", "autograder", "release"]):
        if subprocess.run([sys.executable, *step], cwd=repo).returncode != 0:
            print(f"error: `python {' '.join(step)}` failed", file=sys.stderr)
            return 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.colab", description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson ids (default: every solutions/*.ipynb)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook needs stamping")
    parser.add_argument("--readme", action="store_true", help="print the badges for the README's lesson table")
    parser.add_argument("--from-origin", action="store_true",
                        help="set [tool.course] repository from `git remote get-url origin`, then re-stamp "
                             "solutions/, the README and notebooks/ (a fork's badges in one step)")
    args = parser.parse_args(argv)
    if args.from_origin:
        return from_origin()
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
