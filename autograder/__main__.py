"""python -m autograder: the instructor's command line (release, collect, grade, feedback, export, report, check)."""
import argparse
import os
import sys
from pathlib import Path

from .course import REPO, lesson_ids, release, report_path
from .sandbox.limits import add_arguments, from_arguments

EPILOG = """In a terminal, from the repository root:
  python -m autograder release                       # notebooks/ and course/ from solutions/
  python -m autograder collect downloads.zip --roster roster.csv
  python -m autograder grade --jobs 2                # everyone; or: grade 01_seq2seq_bottleneck --student alice
  python -m autograder feedback                      # course/feedback/<student>/<lesson>/*.html
  python -m autograder export                        # course/export/grades.csv, summary.csv, summary.md
  python -m autograder report                        # course/class_report/index.html: what the class got wrong
  python -m autograder check 03                      # a lesson's tests pass on its solution, run the grader's way

`python -m autograder COMMAND --help` tells more about each command.
"""

DESCRIPTIONS = dict(
    release="Copy solutions/NN_*.ipynb into <course>/source/, run nbgrader generate_assignment, "
            "and copy the student versions to notebooks/. Creates <course>/gradebook.db.",
    collect="Put submissions into <course>/submitted/<student>/<lesson>/. SOURCE is a folder or a .zip "
            "holding, mixed freely: nbgrader's exchange inbound/ (<student>+<lesson>+<time>/, latest wins), "
            "one folder per student, or loose Colab/LMS downloads ('Copy of 02_x.ipynb', '02_x (1).ipynb') "
            "matched to students with --roster. Every file not placed is listed with the reason; "
            "exit status 2 when there is one.",
    grade="Run nbgrader autograde on every submission (or those named), each in its own worker process "
          "with the kernel sandboxed: no access to solutions/, the course directory or the gradebook; "
          "limits on time, memory and processes. Each worker writes a private copy of the gradebook, "
          "merged into <course>/gradebook.db when it ends. A submission that cannot be graded scores 0 "
          "and is flagged; the others go on. A test cell earns its points if and only if it raised no "
          "error, whatever it printed; tampered cell metadata is restored and flagged; an integrity check "
          "after every test cell flags patched checks. Flags and events: "
          "<course>/reports/<lesson>/<student>.json. Ctrl-C (or SIGTERM) stops the workers and kernels, "
          "keeps what finished and lists the rest; running grade again resumes (--force regrades all).",
    feedback="HTML feedback in <course>/feedback/<student>/<lesson>/ for every autograded submission, "
             "with the hidden tests, their tracebacks and any copy of them in outputs removed.",
    export="<dir>/grades.csv (nbgrader's CSV export: one row per student and lesson), <dir>/summary.csv "
           "(per test cell: how many submissions got full marks or zero) and <dir>/summary.md (the same, "
           "most failed first, every flagged submission with its flags and where to open it, every file collect "
           "did not place), <dir>/canvas.csv (Canvas gradebook import) and <dir>/moodle.csv (Moodle grade "
           "import), one column per lesson, with formgrader's overrides.",
    report="One offline HTML page per graded lesson in <course>/class_report/ (and index.html): the class's "
           "score distribution, each exercise's pass rate hardest first, the failure messages grouped by the "
           "check that failed with how many students and who, the flags by kind, what is not graded or pending, "
           "grading times, and each exercise's difficulty and point-biserial correlation. It reads only what "
           "grade wrote and shows failures as the students' feedback shows them (no hidden test).",
    check="Run each named lesson's solution notebook in this process and its test cells the grader's way (outside "
          "the answers' namespace, the answers reached through handles): every test cell must pass. For course "
          "authors, after editing a test; exit status 1 if one fails.",
)


def build_parser():
    """The command line: one subcommand per verb."""
    parser = argparse.ArgumentParser(
        prog="python -m autograder", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Grade the attention course with nbgrader: release, collect, grade, feedback, export, report, "
                    "check.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lessons_help = f"lesson ids (default: every lesson: {', '.join(lesson_ids()) or 'none yet'})"
    course_help = f"nbgrader course directory (default: {REPO / 'course'})"

    def command(name, help):
        return commands.add_parser(name, help=help, description=DESCRIPTIONS[name])

    p = command("release", "regenerate notebooks/ and the course directory from solutions/")
    p.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("collect", "place a folder or zip of submissions into <course>/submitted/")
    p.add_argument("source", metavar="SOURCE", help="a folder or a .zip of submissions")
    p.add_argument("--roster", metavar="CSV", help="CSV with a student_id column (or id, username, email); "
                   "a file or folder belongs to the student whose id or other field (name, email, LMS id) "
                   "appears in its name")
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("grade", "autograde submissions in a sandbox, in parallel")
    p.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    p.add_argument("--student", action="append", metavar="ID", help="grade only this student (repeatable)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                   help=f"submissions graded at once, in separate processes (default: the number of cores, "
                        f"{os.cpu_count() or 1} here)")
    add_arguments(p)  # one option per limit (sandbox/limits.py)
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="grade on a Dask cluster: tcp://HOST:8786 for a running scheduler, or local:N for a "
                        "local cluster of N workers (needs the `cluster` extra; see docs/instructors.md, "
                        "'Grading a large class')")
    p.add_argument("--force", action="store_true",
                   help="regrade submissions already graded (default: skip those whose notebook is unchanged "
                        "since their report was written, so that an interrupted run resumes)")
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("feedback", "HTML feedback per student, without the hidden tests")
    p.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    p.add_argument("--student", action="append", metavar="ID", help="only this student (repeatable)")
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("export", "grades CSV (nbgrader's columns) and a per-question summary")
    p.add_argument("--to", metavar="DIR", help="output folder (default: <course>/export)")
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("report", "what the class got wrong and why: one HTML page per lesson")
    p.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    p.add_argument("--course", default=str(REPO / "course"), help=course_help)

    p = command("check", "a lesson's test cells pass on its solution, run the grader's way")
    p.add_argument("lessons", nargs="+", metavar="LESSON", help="lesson ids or numbers (03), or notebook paths")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "check":
        return _check(args.lessons)
    course = Path(args.course)
    if args.command == "release":
        release(course, args.lessons or None)
    elif args.command == "collect":
        from .collect import collect
        result = collect(args.source, course, lesson_ids(), roster=args.roster)
        return 2 if result.problems or result.collisions else 0
    elif args.command == "grade":
        from .run import GradingInterrupted, grade, grade_cluster
        limits = from_arguments(args)
        try:
            if args.scheduler:
                results = grade_cluster(course, args.lessons or None, args.student, args.scheduler, limits=limits,
                                        force=args.force)
            else:
                results = grade(course, args.lessons or None, args.student, jobs=args.jobs, limits=limits,
                                force=args.force)
        except GradingInterrupted:  # grade() has stopped the workers, kept what finished and said what is left
            return 130
        failed = sum(r.status != "graded" for r in results)
        flagged = sum(bool(r.flags) for r in results)
        pending = sum(bool(r.pending) for r in results)
        print(f"{len(results)} submission(s): {len(results) - failed} graded, {failed} could not be graded "
              f"(scored 0), {pending} pending manual grading (a test the grader could not run: grade it in "
              f"formgrader), {flagged} flagged for review (see {report_path(course, '<lesson>', '<student>')}); "
              "what the class got wrong, by exercise: python -m autograder report")
    elif args.command == "feedback":
        from .feedback import generate_feedback
        generate_feedback(course, args.lessons or None, args.student)
    elif args.command == "export":
        from .export import export
        export(course, args.to or course / "export")
        print("what the class got wrong and why, by exercise: python -m autograder report")
    elif args.command == "report":
        from .class_report import build_report
        build_report(course, args.lessons or None)
    return 0


def _check(lessons):
    from .course import SOLUTIONS
    from .kernel import check_lesson
    failed = 0
    for lesson in lessons:
        path = Path(lesson) if lesson.endswith(".ipynb") else next(SOLUTIONS.glob(f"{lesson}*.ipynb"), None)
        if path is None or not path.exists():
            print(f"no lesson {lesson!r} in {SOLUTIONS}", file=sys.stderr)
            return 2
        print(f"== {path.name}")
        failed += sum(e is not None for e in check_lesson(path).values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
