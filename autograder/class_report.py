"""`report`: what a class got wrong and why, one offline HTML page per lesson and an index for the course.

It reads only what `grade` wrote (the gradebook, each submission's report, the autograded notebooks) and shows, per
lesson: the score distribution; each exercise's pass rate, hardest first; its failure messages grouped by the mistake
they diagnose, else by the check that failed (numbers taken out), with who; the flags by kind; what was not graded
or waits for manual grading; grading times; item statistics. A message is shown as the feedback page shows it
(`shown.py`: name, message cut; hidden-test lines scrubbed), so the page holds no hidden test. Each submission is
read through its course.SubmissionPaths: its outcome (outcome.py), its gradebook entry, its graded notebook.
Every text is escaped, every picture is a PNG inside the page, and the page loads nothing.
"""
import html
import json
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from . import outcome
from .course import course_lessons, submissions
from .class_report_figures import class_figures
from .job import FLAG_KINDS

FOLDER = "class_report"  # <course>/class_report/<lesson>.html and index.html

@dataclass
class Submission:
    student: str
    status: str = "not graded"          # graded | failed | invalid | not graded
    score: float = 0.0
    max_score: float = 0.0
    seconds: float | None = None
    flags: list = field(default_factory=list)
    cells: dict = field(default_factory=dict)      # {test cell: score}, pending cells left out
    pending: list = field(default_factory=list)    # test cells waiting for manual grading
    failures: dict = field(default_factory=dict)   # {test cell: (error name, message as feedback shows it)}


def build_report(course_root, lessons=None, log=print):
    """Write <course>/class_report/<lesson>.html for each graded lesson and index.html; returns the index."""
    from .gradebook import open_gradebook

    course_root = Path(course_root).resolve()
    out = course_root / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    lessons = lessons or course_lessons(course_root)
    summaries = []
    with open_gradebook(course_root) as gb:
        for lesson in lessons:
            cells, submissions = _read_lesson(course_root, gb, lesson)
            if not submissions:
                continue
            items = _items(cells, submissions)
            page = out / f"{lesson}.html"
            _write(page, _lesson_page(lesson, items, submissions))
            summaries.append(_lesson_summary(lesson, items, submissions))
            log(f"class report {lesson} -> {page}")
    index = out / "index.html"
    _write(index, _index_page(summaries))
    log(f"class report index -> {index}")
    return index


# ------------------------------------------------------------------ reading what grading wrote

def _read_lesson(course_root, gb, lesson):
    """([(test cell, max points)] in notebook order, [Submission]) of one lesson."""
    from nbgrader.api import MissingEntry

    from . import cells as cellmod
    from .gradebook import pending
    handed_in = submissions(course_root, lessons=[lesson])
    if not handed_in or not handed_in[0].source.exists():
        return [], []
    source = json.loads(handed_in[0].source.read_text())
    tests = [(cellmod.grade_id(c), float(c["metadata"]["nbgrader"].get("points", 0)))
             for c in source["cells"] if cellmod.is_test(c)]
    secrets = sorted({line for c in source["cells"] if c.get("cell_type") == "code"
                      for line in cellmod.secret_lines("".join(c["source"]) if isinstance(c["source"], list)
                                                       else c["source"])}, key=len, reverse=True)
    result = []
    for paths in sorted(handed_in, key=lambda p: p.student):
        sub = Submission(paths.student)
        found = outcome.read(paths)
        if found is not None:
            sub.status, sub.seconds, sub.flags = found.status, found.seconds, found.flags
        try:
            grades = {g.name: g for notebook in gb.find_submission(lesson, paths.student).notebooks
                      for g in notebook.grades}
        except MissingEntry:
            grades = {}
        for name, g in grades.items():
            if pending(g):
                sub.pending.append(name)
            elif g.score is not None:
                sub.cells[name] = float(g.score)
        sub.max_score = sum(points for _, points in tests)
        sub.score = sum(sub.cells.values())
        sub.failures = _failures(paths, secrets)
        result.append(sub)
    return tests, result


def _failures(paths, secrets):
    """{test cell: (error name, message)} of the autograded notebook, as the student's feedback shows them."""
    from . import cells as cellmod
    from .shown import failure, without_secrets
    try:
        nb = json.loads(paths.graded.read_text())
    except (OSError, ValueError):
        return {}
    found = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and cellmod.is_test(cell):
            shown = failure(cell.get("outputs", []))
            if shown is not None:
                name, message = shown
                found[cellmod.grade_id(cell)] = (name, without_secrets(message, secrets))
    return found


# ------------------------------------------------------------------ the statistics

CHECK_CHARS = 150  # of a message with its numbers out: shorter than any cut message, long enough to name the check


def check_of(message):
    """What a failure message names, the same for every student: the mistake it diagnoses (course_utils.diagnosis),
    whatever case failed; else the check, the message with its numbers (not a name's digits, as in float32) taken
    out, to its first CHECK_CHARS characters (a message cut for feedback ends where its numbers' lengths cut it)."""
    from course_utils.diagnosis import DIAGNOSIS, mistake_of
    message = message if (mistake := mistake_of(message)) is None else DIAGNOSIS + mistake
    text = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", message.removesuffix("..."))
    text = re.sub(r"(?<![A-Za-z_\d.])[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", "#", text)
    return re.sub(r"\s+", " ", text).strip()[:CHECK_CHARS]


def point_biserial(passed, rest):
    """Point-biserial correlation of passing an item (0/1) with the score on the rest of the lesson; None when it
    is undefined (everyone or no one passed, or the rest does not vary)."""
    n = len(passed)
    ones = [r for p, r in zip(passed, rest) if p]
    zeros = [r for p, r in zip(passed, rest) if not p]
    if not ones or not zeros or n < 3:
        return None
    spread = statistics.pstdev(rest)
    if spread == 0:
        return None
    p = len(ones) / n
    return (statistics.fmean(ones) - statistics.fmean(zeros)) / spread * math.sqrt(p * (1 - p))


def _items(cells, submissions):
    """Per test cell: pass rate, mean fraction, point-biserial, and the failures grouped by check."""
    graded = [s for s in submissions if s.status == "graded"]
    items = []
    for name, points in cells:
        scored = [s for s in graded if name in s.cells]
        passed = [s.cells[name] >= points for s in scored]
        rest = [s.score - s.cells[name] for s in scored]
        groups = defaultdict(list)
        for s in scored:
            if s.cells[name] < points:
                error, message = s.failures.get(name, ("", "no error shown (a failed check printed nothing)"))
                groups[check_of(message)].append((s.student, error, message))
        items.append(dict(name=name, points=points, n=len(scored), passed=sum(passed),
                          rate=sum(passed) / len(scored) if scored else None,
                          mean=statistics.fmean([s.cells[name] / points for s in scored]) if scored and points else None,
                          r=point_biserial(passed, rest), groups=sorted(groups.values(), key=len, reverse=True),
                          pending=sorted(s.student for s in graded if name in s.pending)))
    return items


def _lesson_summary(lesson, items, submissions):
    graded = [s for s in submissions if s.status == "graded"]
    hardest = min((i for i in items if i["rate"] is not None), key=lambda i: i["rate"], default=None)
    return dict(lesson=lesson, submissions=len(submissions), graded=len(graded),
                mean=statistics.fmean([s.score / s.max_score for s in graded if s.max_score]) if graded else None,
                hardest=hardest, flagged=sum(bool(s.flags) for s in submissions),
                pending=sum(bool(s.pending) for s in submissions))


# ------------------------------------------------------------------ the pages

STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a;
line-height:1.45}table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #888;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#eee}td.n{text-align:right}code{background:#f2f2f2;padding:0 .2rem}
.why{font-size:.92rem}details{margin:.2rem 0}a{color:#1a4f8b}"""


def _page(title, body):
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
            f'style-src \'unsafe-inline\'"><style>{STYLE}</style></head><body><main>{body}</main></body></html>\n')


def _student_links(lesson, students):
    out = []
    for student in students:
        name = html.escape(student)
        report = f"../reports/{quote(lesson)}/{quote(student)}.json"
        feedback = f"../feedback/{quote(student)}/{quote(lesson)}/{quote(lesson)}.html"
        out.append(f'{name} (<a href="{html.escape(report)}">report</a>, '
                   f'<a href="{html.escape(feedback)}">feedback</a>)')
    return ", ".join(out)


def _lesson_page(lesson, items, submissions):
    e = html.escape
    graded = [s for s in submissions if s.status == "graded"]
    scores_png, rates_png = class_figures(submissions, items)
    mean = statistics.fmean([s.score for s in graded]) if graded else 0
    top = max((s.max_score for s in graded), default=0)
    hardest_first = sorted(items, key=lambda i: (i["rate"] is None, i["rate"] or 0))
    parts = [f"<h1>Class report: {e(lesson)}</h1>",
             f"<p>{len(submissions)} submission(s), {len(graded)} graded; mean score {mean:.1f} of {top:g}. "
             "Written from the gradebook, the grader's reports and the autograded notebooks; failure messages are "
             "shown as the students' feedback shows them (no hidden test).</p>",
             "<h2>Scores</h2>",
             f'<img src="data:image/png;base64,{scores_png}" alt="Histogram of the class\'s scores on {e(lesson)}: '
             f'{len(graded)} graded submissions, mean {mean:.1f} of {top:g}.">',
             "<h2>Exercises, hardest first</h2>",
             f'<img src="data:image/png;base64,{rates_png}" alt="Bar chart of the share of graded submissions with '
             f'full marks on each exercise of {e(lesson)}, hardest first (the same figures as the table below).">',
             _exercise_table(hardest_first),
             "<h2>What the class got wrong, by exercise</h2>",
             *[_failures_of(lesson, i) for i in hardest_first if i["n"] > i["passed"]],
             _flags_section(lesson, submissions),
             _waiting_section(lesson, submissions),
             _time_section(submissions)]
    return _page(f"Class report: {lesson}", "\n".join(parts))


def _exercise_table(items):
    e = html.escape
    rows = [f"<tr><td><code>{e(i['name'])}</code></td><td class=n>{i['points']:g}</td>"
            f"<td class=n>{i['passed']} of {i['n']}</td>"
            f"<td class=n>{_percent(i['rate'])}</td><td class=n>{_percent(i['mean'])}</td>"
            f"<td class=n>{'-' if i['r'] is None else format(i['r'], '.2f')}</td>"
            f"<td class=n>{len(i['pending'])}</td></tr>" for i in items]
    return ("<table><caption>Each exercise (test cell): pass rate, mean score, and item statistics</caption>"
            '<tr><th scope="col">exercise</th><th scope="col">points</th><th scope="col">full marks</th>'
            '<th scope="col">pass rate</th><th scope="col">mean score</th><th scope="col">point-biserial r</th>'
            '<th scope="col">pending</th></tr>' + "".join(rows) +
            "</table><p class=why>The <em>pass rate</em> is the item's difficulty (the share of graded "
            "submissions with full marks on it). The <em>point-biserial r</em> says how well the exercise "
            "separates strong from weak submissions: the correlation between passing it and the score on the "
            "rest of the lesson (near 0: it does not separate them; above 0.3: it does; below 0: weak "
            "submissions pass it more often than strong ones, worth a look at the exercise or its tests).</p>")


def _failures_of(lesson, item):
    """One exercise's failures: a row per mistake diagnosed or check that failed, with one student's message and who."""
    from course_utils.diagnosis import mistake_of; e = html.escape  # noqa: E702
    parts = [f"<h3><code>{e(item['name'])}</code>: {item['n'] - item['passed']} of {item['n']} did not get full "
             'marks</h3><table><tr><th scope="col">students</th><th scope="col">the mistake diagnosed, else the '
             'check that failed (one student\'s message)</th><th scope="col">who</th></tr>']
    for group in item["groups"]:
        student, error, message = group[0]
        share = 100 * len(group) / item["n"]
        others = {m: s for m, s in sorted({(m, s) for s, _, m in group}) if m != message}
        more = "" if not others else (
            f"<details><summary>{len(others)} other wording(s) of this check</summary><ul>"
            + "".join(f"<li>{e(m)} ({e(s)})</li>" for m, s in list(others.items())[:5]) + "</ul></details>")
        mistake = mistake_of(message)
        lead = f"<strong>{e(mistake)}</strong><br>" if mistake is not None else ""
        parts.append(f"<tr><td class=n>{len(group)} ({share:.0f}%)</td><td>{lead}{e(error) + ': ' if error else ''}"
                     f"{e(message)}{more}</td><td>{_student_links(lesson, sorted(s for s, _, _ in group))}</td></tr>")
    return "".join(parts) + "</table>"


def _flags_section(lesson, submissions):
    e = html.escape
    flags = defaultdict(list)
    for s in submissions:
        for f in s.flags:
            flags[f.kind].append((s.student, f))  # one group per kind (job.Finding)
    parts = [f"<h2>Flags for review ({sum(len(v) for v in flags.values())})</h2>"]
    if not flags:
        parts.append("<p>No submission was flagged.</p>")
    for kind in sorted(flags, key=lambda k: (-len({s for s, _ in flags[k]}), k)):
        parts.append(f'<h3 id="flag-{e(kind)}"><code>{e(kind)}</code>: {len({s for s, _ in flags[kind]})} student(s)</h3>')
        parts.append(f"<p>{e(FLAG_KINDS.get(kind, 'a kind of flag this report does not know'))}</p><ul>")
        parts += [f"<li>{_student_links(lesson, [student])}: {e(f.text[:400])}</li>" for student, f in flags[kind]]
        parts.append("</ul>")
    return "\n".join(parts)


def _waiting_section(lesson, submissions):
    e = html.escape
    not_graded = [s for s in submissions if s.status != "graded"]
    waiting = [s for s in submissions if s.pending]
    parts = [f"<h2>Not graded ({len(not_graded)}) and pending manual grading ({len(waiting)})</h2><ul>"]
    parts += [f"<li>{_student_links(lesson, [s.student])}: {e(s.status)}</li>" for s in not_graded]
    parts += [f"<li>{_student_links(lesson, [s.student])}: waits for a score in formgrader on "
              f"{', '.join(f'<code>{e(c)}</code>' for c in s.pending)}</li>" for s in waiting]
    parts.append("</ul>" if not_graded or waiting else "<li>none</li></ul>")
    return "\n".join(parts)


def _time_section(submissions):
    times = sorted((s.seconds, s.student) for s in submissions if isinstance(s.seconds, (int, float)))
    if not times:
        return ""
    values = [t for t, _ in times]
    return (f"<h2>Grading time</h2><p>{len(values)} submission(s): median {statistics.median(values):.0f} s, "
            f"longest {values[-1]:.0f} s, {sum(values) / 60:.1f} min in all. Slowest: "
            + ", ".join(f"{html.escape(student)} ({t:.0f} s)" for t, student in times[::-1][:5]) + ".</p>")


def _index_page(summaries):
    e = html.escape
    rows = []
    for s in summaries:
        hardest = s["hardest"]
        rows.append(f'<tr><td><a href="{quote(s["lesson"])}.html">{e(s["lesson"])}</a></td>'
                    f"<td class=n>{s['submissions']}</td><td class=n>{s['graded']}</td>"
                    f"<td class=n>{_percent(s['mean'])}</td><td>"
                    + ("-" if hardest is None else f"<code>{e(hardest['name'])}</code> ({_percent(hardest['rate'])})")
                    + f"</td><td class=n>{s['flagged']}</td><td class=n>{s['pending']}</td></tr>")
    body = ("<h1>Class report</h1><p>One page per graded lesson: where the class is stuck and why.</p>"
            "<table><caption>Lessons</caption><tr><th scope=\"col\">lesson</th><th scope=\"col\">submissions</th>"
            "<th scope=\"col\">graded</th><th scope=\"col\">mean score</th><th scope=\"col\">hardest exercise "
            "(pass rate)</th><th scope=\"col\">flagged</th><th scope=\"col\">pending</th></tr>"
            + "".join(rows) + "</table>" + ("" if rows else "<p>No lesson has been graded yet.</p>"))
    return _page("Class report", body)


def _percent(fraction):
    return "-" if fraction is None else f"{100 * fraction:.0f}%"


def _write(path, text):
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)
