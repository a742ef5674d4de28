"""python -m autograder: the instructor's command line."""
import argparse
import sys
from pathlib import Path

from .course import REPO, lesson_ids, release


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m autograder",
        description="Grade the attention course with nbgrader. Run it from the repository root.")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("release", help="regenerate notebooks/ (and the course directory) from solutions/")
    p.add_argument("lessons", nargs="*", help=f"lesson ids (default: all: {', '.join(lesson_ids()) or 'none yet'})")
    p.add_argument("--course", default=str(REPO / "course"), help="nbgrader course directory (default: ./course)")
    args = parser.parse_args(argv)
    if args.command == "release":
        release(Path(args.course), args.lessons or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
