"""Colab: every notebook has the "Open in Colab" badge and the Colab set-up cell, stamped from tools/colab.py."""
import ast
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.nbtools import LESSONS, NOTEBOOKS, REPO, SOLUTIONS, load
from tools import colab

STAMP_HINT = "run `python -m tools.colab && python -m autograder release`"


@pytest.mark.parametrize("folder", [SOLUTIONS, NOTEBOOKS], ids=["solutions", "notebooks"])
@pytest.mark.parametrize("lesson", LESSONS)
def test_notebook_has_badge_and_setup_cell_from_the_one_constant(lesson, folder):
    path = folder / f"{lesson}.ipynb"
    assert path.exists(), f"{path} is missing: {STAMP_HINT}"
    nb = load(path)
    assert colab.problems(nb, lesson) == [], f"{path.relative_to(REPO)}: {colab.problems(nb, lesson)}; {STAMP_HINT}"
    badge = nb.cells[0].source
    assert colab.REPO_URL.removeprefix("https://github.com/") in badge
    assert badge.endswith(f"/blob/{colab.BRANCH}/notebooks/{lesson}.ipynb)"), badge


def test_every_url_comes_from_repo_url():
    assert colab.REPO_URL.startswith("https://github.com/") and colab.REPO_URL.count("/") == 4
    assert colab.COLAB_BASE == (f"https://colab.research.google.com/github/"
                                f"{colab.REPO_URL[len('https://github.com/'):]}/blob/{colab.BRANCH}/")
    assert colab.PIP_TARGET == f"course-utils @ git+{colab.REPO_URL}@{colab.BRANCH}"
    assert colab.PIP_TARGET in colab.setup_source()


def test_stamping_is_idempotent_and_replaces_stale_cells(tmp_path):
    lesson = "01_seq2seq_bottleneck"
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    assert not colab.stamp(nb, lesson), f"solutions/{lesson}.ipynb is not stamped: {STAMP_HINT}"
    # a stale badge (an old address) and a set-up cell moved to the end are both fixed, not duplicated
    nb.cells[0].source = nb.cells[0].source.replace(colab.REPO_URL[8:], "github.com/old/place")
    setup = next(c for c in nb.cells if c.get("id") == colab.SETUP_ID)
    nb.cells.remove(setup)
    nb.cells.append(setup)
    assert colab.problems(nb, lesson)
    assert colab.stamp(nb, lesson)
    assert colab.problems(nb, lesson) == []
    assert not colab.stamp(nb, lesson)
    assert sum(c.get("id") in (colab.BADGE_ID, colab.SETUP_ID) for c in nb.cells) == 2


def test_an_untagged_copy_of_the_setup_cell_is_found_and_removed():
    """Lesson 11 was written with its own copy of the set-up cell (no id, no tag): it ran twice, unseen."""
    import copy
    lesson = "01_seq2seq_bottleneck"
    nb = load(SOLUTIONS / f"{lesson}.ipynb")
    stray = copy.deepcopy(next(c for c in nb.cells if c.get("id") == colab.SETUP_ID))
    stray["id"], stray.metadata["tags"] = "written-by-hand", []
    nb.cells.insert(3, stray)
    assert "expected one 'colab-setup' cell, found 2" in colab.problems(nb, lesson)
    assert colab.stamp(nb, lesson) and colab.problems(nb, lesson) == []
    assert sum(c.source == colab.setup_source() for c in nb.cells) == 1


def _run_setup_cell(monkeypatch, on_colab):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append((a, k)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(colab.setup_source(), "<colab-setup>", "exec"), {})
    return calls


def test_setup_cell_does_nothing_off_colab(monkeypatch, capsys):
    assert _run_setup_cell(monkeypatch, on_colab=False) == []
    assert capsys.readouterr() == ("", "")


def test_setup_cell_on_colab_installs_course_utils_without_touching_colabs_packages(monkeypatch):
    calls = _run_setup_cell(monkeypatch, on_colab=True)
    assert len(calls) == 1, calls
    (argv,), kwargs = calls[0]
    assert argv[:4] == [sys.executable, "-m", "pip", "install"] and kwargs.get("check") is True
    assert "--no-deps" in argv, "without --no-deps pip may upgrade Colab's torch, numpy or ipywidgets"
    assert argv[-1] == colab.PIP_TARGET
    assert not any(re.match(r"(torch|numpy|matplotlib|ipywidgets)\b", a) for a in argv[4:]), argv
    # plain Python: it parses without IPython's magics, on every Python the course supports
    ast.parse(colab.setup_source())


def test_course_utils_dependencies_are_lower_bounds_only():
    """Even without --no-deps, pip must never be asked to replace Colab's versions of these."""
    import tomllib
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", dep).group(0).lower()
        if name in {"torch", "numpy", "matplotlib", "ipywidgets"}:
            assert "==" not in dep and "~=" not in dep, f"pyproject pins {dep!r}: Colab would reinstall {name}"
    ipywidgets = next(d for d in deps if d.lower().startswith("ipywidgets"))
    assert ">=7.7" in ipywidgets.replace(" ", ""), f"{ipywidgets!r} must admit Colab's ipywidgets 7.7.1"


def test_readme_lesson_table_has_a_colab_badge_for_every_lesson():
    readme = (REPO / "README.md").read_text()
    missing = [lesson for lesson in LESSONS if colab.colab_url(lesson) not in readme]
    assert not missing, (f"README.md's lesson table lacks an 'Open in Colab' badge for {missing}; "
                         f"`python -m tools.colab --readme` prints them")
    for heading in ("For students", "For instructors", "On Colab"):
        assert re.search(rf"^#+ {heading}\b", readme, re.M), f"README.md has no '{heading}' section"


# --- Python 3.12 and 3.13 (Colab runs 3.13): nothing they removed ------------------------------------------

REMOVED_MODULES = {  # removed in 3.12 (PEP 594 started in 3.13, distutils/imp/asyn* in 3.12)
    "distutils", "imp", "asynchat", "asyncore", "smtpd",
    "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
    "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3", "tkinter.tix",
}
REMOVED_ATTRIBUTES = {  # module: names removed in 3.12 or 3.13
    "unittest": {"makeSuite", "findTestCases", "getTestCaseNames"},
    "locale": {"resetlocale"},
    "configparser": {"SafeConfigParser", "readfp"},
    "pkgutil": {"ImpImporter", "ImpLoader"},
    "typing": {"io", "re"},
    "pathlib": {"link_to"},
    "ssl": {"wrap_socket", "match_hostname"},
}


def _python_sources():
    for path in sorted((REPO / "course_utils").rglob("*.py")) + sorted((REPO / "tools").glob("*.py")):
        yield str(path.relative_to(REPO)), path.read_text()
    for lesson in LESSONS:
        for i, cell in enumerate(load(SOLUTIONS / f"{lesson}.ipynb").cells):
            if cell.cell_type == "code":
                # IPython magics and shell escapes are not Python: blank them out
                text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                 for line in cell.source.splitlines())
                yield f"solutions/{lesson}.ipynb cell {i}", text


def test_nothing_removed_in_python_312_or_313_is_used():
    used = []
    for where, text in _python_sources():
        tree = ast.parse(text, where)
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in REMOVED_MODULES or name in REMOVED_MODULES:
                    used.append(f"{where}: imports {name}")
                module, _, attr = name.rpartition(".")
                if attr in REMOVED_ATTRIBUTES.get(module, ()):
                    used.append(f"{where}: imports {name}")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.attr in REMOVED_ATTRIBUTES.get(node.value.id, ()):
                    used.append(f"{where}: uses {node.value.id}.{node.attr}")
    assert not used, "removed in Python 3.12/3.13 (Colab runs 3.13):\n" + "\n".join(used)


def _python313():
    """A working Python 3.13 interpreter: on PATH, or any ~/.pyenv/versions/3.13.*."""
    candidates = sorted(str(p) for p in (Path.home() / ".pyenv/versions").glob("3.13*/bin/python3.13"))
    candidates.append(shutil.which("python3.13"))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 13)":
            return candidate
    return None


def test_code_compiles_cleanly_under_python_313(tmp_path):
    """Python 3.13 (Colab's) compiles every source without a SyntaxError or SyntaxWarning
    (3.12 turned invalid escape sequences like "\\d" into SyntaxWarnings)."""
    python = _python313()
    if python is None:
        pytest.skip("no python3.13 interpreter on PATH (or in ~/.pyenv): cannot compile under Colab's Python")
    sources = []
    for i, (where, text) in enumerate(_python_sources()):
        path = tmp_path / f"src{i}.py"
        path.write_text(text)
        sources.append((where, path))
    script = ("import sys, warnings\nwarnings.simplefilter('error')\nbad = 0\n"
              "for path, where in zip(sys.argv[1::2], sys.argv[2::2]):\n"
              "    try:\n        compile(open(path).read(), where, 'exec')\n"
              "    except (SyntaxError, SyntaxWarning) as e:\n        print(where, repr(e)); bad += 1\n"
              "sys.exit(1 if bad else 0)\n")
    args = [a for where, path in sources for a in (str(path), where)]
    result = subprocess.run([python, "-c", script, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
