"""Every exercise of every lesson carries its own instructions, and the numbering has no gaps.

A graded unit is a run of solution cells followed by its test cell. Its instructions are the
markdown above it, back to the nearest heading (ready-made code cells may sit in between, as long
as no other unit does): that heading is the exercise heading
("## N. ✏️ Exercise K: title (P points)", or "### ✏️ Check your understanding: title (1 point)")
with the points of the test cell; below that heading the text names what to build (every
function, class or answer variable the solution cells define) and says how it is checked
("**Checked by:**"). Sections ("## N.") count 1, 2, 3, ... and so do exercises ("Exercise K").
A lesson that loses an exercise's markdown (lesson 03 did, issue 20) fails here.
"""
import ast
import re

import pytest

from tests.nbtools import LESSONS, SOLUTIONS, grade_id, is_solution, is_test, load

HEADING = re.compile(r"^#{1,6} .*$", re.M)
EXERCISE = re.compile(r"✏️\s*(?:Exercise\s+(?P<number>\d+)|Check your understanding)")
POINTS = re.compile(r"\((?:[^()]*?,\s*)?(?P<points>\d+(?:\.\d+)?) points?\b[^()]*\)")
SECTION = re.compile(r"^## (\d+)\. ", re.M)
EXERCISE_NUMBER = re.compile(r"^#{1,6} .*✏️\s*Exercise\s+(\d+)\b", re.M)


def units(nb):
    """[(test cell, [its solution cells], its instructions: the cells from the nearest markdown heading
    above the first solution cell down to it, or [] if another unit comes first)], in notebook order."""
    found = []
    for i, cell in enumerate(nb.cells):
        if not is_test(cell):
            continue
        first = i
        while first > 0 and is_solution(nb.cells[first - 1]):
            first -= 1
        start = first - 1
        while start >= 0 and not (nb.cells[start].cell_type == "markdown" and HEADING.search(nb.cells[start].source)):
            if is_test(nb.cells[start]) or is_solution(nb.cells[start]):
                start = -1
                break
            start -= 1
        found.append((cell, nb.cells[first:i], nb.cells[start:first] if start >= 0 else []))
    return found


def exercise_heading(cells):
    """(the exercise heading line, the markdown from it down to the solution), or (None, None)."""
    if not cells:
        return None, None
    headings = list(HEADING.finditer(cells[0].source))
    if not EXERCISE.search(headings[-1].group(0)):
        return None, None
    text = cells[0].source[headings[-1].start():]
    return headings[-1].group(0), "\n\n".join([text] + [c.source for c in cells[1:] if c.cell_type == "markdown"])


def defined_names(cells):
    """What the student builds: the solution cells' top-level functions and classes, and the names
    they assign at top level between `### BEGIN SOLUTION` and `### END SOLUTION` (concept answers;
    what a cell gives ready-made is not the student's to name)."""
    names = []
    for cell in cells:
        lines = [("" if line.lstrip().startswith("%") else line) for line in cell.source.splitlines()]
        answer_lines, inside = set(), False
        for number, line in enumerate(lines, 1):
            inside = (inside or line == "### BEGIN SOLUTION") and line != "### END SOLUTION"
            if inside:
                answer_lines.add(number)
        for node in ast.parse("\n".join(lines)).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno in answer_lines:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def _notebook(lesson):
    return load(SOLUTIONS / f"{lesson}.ipynb")


def _fail_if(problems, what):
    assert not problems, f"{what}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_unit_has_an_exercise_heading_before_it(lesson):
    problems = []
    for test, solutions, before in units(_notebook(lesson)):
        if not solutions:
            problems.append(f"{grade_id(test)}: no solution cell right before the test cell")
        elif exercise_heading(before)[0] is None:
            problems.append(f"{grade_id(test)}: the nearest heading above solution cell {grade_id(solutions[0])!r} "
                            "is not an exercise heading ('## N. ✏️ Exercise K: ... (P points)')")
    _fail_if(problems, f"{lesson}: exercises without their instructions")


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_solution_cell_is_graded(lesson):
    nb = _notebook(lesson)
    graded = {grade_id(c) for _, solutions, _ in units(nb) for c in solutions}
    problems = [f"solution cell {grade_id(c)!r} is not followed by a test cell"
                for c in nb.cells if is_solution(c) and grade_id(c) not in graded]
    _fail_if(problems, f"{lesson}: ungraded solution cells")


@pytest.mark.parametrize("lesson", LESSONS)
def test_heading_points_match_the_test_cell(lesson):
    problems = []
    for test, _, before in units(_notebook(lesson)):
        heading, _ = exercise_heading(before)
        if heading is None:
            continue  # reported by test_every_unit_has_an_exercise_heading_before_it
        match = POINTS.search(heading)
        points = float(test.metadata["nbgrader"].get("points", 0))
        if match is None:
            problems.append(f"{grade_id(test)}: heading {heading!r} does not say its points")
        elif float(match.group("points")) != points:
            problems.append(f"{grade_id(test)}: heading {heading!r} says {match.group('points')} points, "
                            f"the test cell gives {points:g}")
    _fail_if(problems, f"{lesson}: points in headings")


@pytest.mark.parametrize("lesson", LESSONS)
def test_instructions_name_what_to_build(lesson):
    problems = []
    for test, solutions, before in units(_notebook(lesson)):
        heading, text = exercise_heading(before)
        if heading is None:
            continue
        names = defined_names(solutions)
        if not names:
            problems.append(f"{grade_id(test)}: its solution cells define nothing")
        for name in names:
            if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
                problems.append(f"{grade_id(test)}: the instructions under {heading!r} never name {name!r}")
    _fail_if(problems, f"{lesson}: instructions that do not say what to build")


@pytest.mark.parametrize("lesson", LESSONS)
def test_instructions_say_how_it_is_checked(lesson):
    problems = []
    for test, _, before in units(_notebook(lesson)):
        heading, text = exercise_heading(before)
        if heading is not None and "**Checked by:**" not in text:
            problems.append(f"{grade_id(test)}: no '**Checked by:**' under {heading!r}")
    _fail_if(problems, f"{lesson}: instructions that do not say how they are checked")


@pytest.mark.parametrize("lesson", LESSONS)
def test_sections_are_numbered_without_gaps(lesson):
    numbers = [int(n) for c in _notebook(lesson).cells if c.cell_type == "markdown" for n in SECTION.findall(c.source)]
    assert numbers == list(range(1, len(numbers) + 1)), f"{lesson}: sections numbered {numbers}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_exercises_are_numbered_without_gaps(lesson):
    numbers = [int(n) for c in _notebook(lesson).cells if c.cell_type == "markdown"
               for n in EXERCISE_NUMBER.findall(c.source)]
    assert numbers and numbers == list(range(1, len(numbers) + 1)), f"{lesson}: exercises numbered {numbers}"


def _sentences(text):
    """The sentences of a markdown text, whitespace folded; short ones (labels, "Try:") are left out."""
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if len(s) >= 40]


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_paragraph_or_sentence_is_repeated(lesson):
    """A block appended twice by an editing script (lesson 01's summary held its References four times,
    lesson 07's a sentence six times) is caught here, whichever cell it lands in."""
    seen, problems = {}, []
    for index, cell in enumerate(_notebook(lesson).cells):
        if cell.cell_type != "markdown":
            continue
        for sentence in _sentences(cell.source):
            if sentence in seen:
                problems.append(f"cell {index} repeats cell {seen[sentence]}: {sentence[:120]!r}")
            seen.setdefault(sentence, index)
    _fail_if(problems, f"{lesson}: repeated text (say it once)")


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_code_cell_is_repeated(lesson):
    """A cell inserted twice (lesson 11 carried a second, untagged copy of the Colab set-up cell) runs twice."""
    seen, problems = {}, []
    for index, cell in enumerate(_notebook(lesson).cells):
        source = cell.source.strip()
        if cell.cell_type != "code" or not source:
            continue
        if source in seen:
            problems.append(f"cell {index} repeats cell {seen[source]}: {source.splitlines()[0][:120]!r}")
        seen.setdefault(source, index)
    _fail_if(problems, f"{lesson}: repeated code cells")
