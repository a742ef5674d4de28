"""The nbgrader course directory built from solutions/, and the release step."""
import copy
import dataclasses
import functools
import shutil
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
CONFIG_FILE = Path(__file__).resolve().parent / "nbgrader_config.py"


def lesson_ids(solutions=SOLUTIONS):
    """Assignment ids, one per solution notebook: '01_seq2seq_bottleneck', ..."""
    return sorted(p.stem for p in Path(solutions).glob("[0-9][0-9]_*.ipynb"))


# ---------------------------------------------------------------- where things are in a course directory

REPORTS = "reports"  # the grader's own folder: <course>/reports/<lesson>/<student>.json
TRIMMED = "trimmed"  # size.py keeps an original it trimmed here: <course>/trimmed/<student>/<lesson>/


@functools.lru_cache(maxsize=1)
def _layout():
    from nbgrader.coursedir import CourseDirectory
    return CourseDirectory(config=_config_file())  # the course's configuration, as nbgrader's converters read it


def step_folder(course_root, step, lesson, student="."):
    """<course>/<step>/<student>/<lesson>, laid out as nbgrader lays it out (CourseDirectory's directory_structure
    and step folders). step: "source", "release", "submitted", "autograded" or "feedback"; source and release
    have no student."""
    layout = _layout()
    relative = layout.directory_structure.format(nbgrader_step=getattr(layout, f"{step}_directory"),
                                                 student_id=student, assignment_id=lesson)
    return Path(course_root, relative)


def step_notebook(course_root, step, lesson, student="."):
    """The lesson's notebook in step_folder: <course>/<step>/<student>/<lesson>/<lesson>.ipynb."""
    return step_folder(course_root, step, lesson, student) / f"{lesson}.ipynb"


def step_root(course_root, step):
    """<course>/<step>: where nbgrader keeps every notebook of that step."""
    return Path(course_root, getattr(_layout(), f"{step}_directory"))


def step_folders(course_root, step):
    """Every <course>/<step>/<student>/<lesson> folder there is, sorted (submitted or autograded)."""
    return sorted(step_root(course_root, step).glob("*/*"))


def course_lessons(course_root, step="source"):
    """The lessons the course has in `step` (source: every lesson released), sorted."""
    root = step_root(course_root, step)
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def gradebook_path(course_root):
    return Path(course_root, "gradebook.db")


def sqlite_url(path):
    """The SQLAlchemy URL of an SQLite file (nbgrader's db_url): the one place it is spelled."""
    return f"sqlite:///{Path(path).resolve()}"


def report_path(course_root, lesson, student):
    """What grading found for one submission (flags, events): <course>/reports/<lesson>/<student>.json."""
    return Path(course_root, REPORTS, lesson, f"{student}.json")


def work_folder(course_root, lesson, student):
    """A grading worker's private scratch folder (its copy of the gradebook): <course>/.grading/<lesson>/<student>."""
    return Path(course_root, ".grading", lesson, student)


def trimmed_folder(course_root, lesson, student):
    """Where size.py keeps a submission's original when it trimmed it: <course>/trimmed/<student>/<lesson>."""
    return Path(course_root, TRIMMED, student, lesson)


@dataclasses.dataclass(frozen=True)
class SubmissionPaths:
    """Every path of one submission in a course, computed once, here, for every command that reads or writes it."""
    course: Path
    lesson: str
    student: str
    submitted: Path      # the notebook as handed in (its folder: submitted.parent)
    source: Path         # the lesson's instructor notebook
    release: Path        # the lesson's student notebook as released
    autograded: Path     # the folder nbgrader writes the graded copy to
    graded: Path         # the graded copy, in `autograded`
    feedback: Path       # the folder of its feedback pages
    report: Path         # what grading found (report_path; read and written by outcome.py)
    trimmed: Path        # the original of a notebook size.py trimmed (trimmed_folder)
    work: Path           # the grading worker's scratch folder (work_folder)
    gradebook: Path      # the course gradebook


def submission_paths(course_root, lesson, student):
    """The SubmissionPaths of one submission."""
    course = Path(course_root)
    return SubmissionPaths(course=course, lesson=lesson, student=student,
                           submitted=step_notebook(course, "submitted", lesson, student),
                           source=step_notebook(course, "source", lesson),
                           release=step_notebook(course, "release", lesson),
                           autograded=step_folder(course, "autograded", lesson, student),
                           graded=step_notebook(course, "autograded", lesson, student),
                           feedback=step_folder(course, "feedback", lesson, student),
                           report=report_path(course, lesson, student),
                           trimmed=trimmed_folder(course, lesson, student), work=work_folder(course, lesson, student),
                           gradebook=gradebook_path(course))


def submissions(course_root, lessons=None, students=None, step="submitted"):
    """[SubmissionPaths] of every <course>/<step>/<student>/<lesson>/ there is (step: submitted, or autograded for
    what was graded), of the lessons and students named if any, sorted by student then lesson: every command
    that reads or writes submissions (grade, feedback, export, report) takes its paths from here."""
    found = []
    for folder in step_folders(course_root, step):
        student, lesson = folder.parent.name, folder.name
        if folder.is_dir() and (not lessons or lesson in lessons) and (not students or student in students):
            found.append(submission_paths(course_root, lesson, student))
    return found


@functools.lru_cache(maxsize=1)
def _config_file():
    return PyFileConfigLoader(CONFIG_FILE.name, path=str(CONFIG_FILE.parent)).load_config()


def load_config(course_root):
    """The course's nbgrader config (autograder/nbgrader_config.py) with its root set to `course_root`."""
    config = copy.deepcopy(_config_file())  # each caller changes its own copy (limits, gradebook URL)
    config.CourseDirectory.root = str(Path(course_root).resolve())
    return config


def lesson_notebook(config, resources, step):
    """The notebook nbgrader is converting, as it is in `step`: "source" or "release" (the lesson's), or
    "submitted" (the student's own, as handed in); None if it is missing, unreadable or invalid.

    `resources["nbgrader"]` (assignment, notebook, student) is what nbgrader's converters pass their preprocessors.
    """
    import nbformat
    from nbgrader.coursedir import CourseDirectory
    try:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=config)
        folder = getattr(coursedir, f"{step}_directory")
        student = info["student"] if step == "submitted" else "."
        path = Path(coursedir.format_path(folder, student, info["assignment"]), f"{info['notebook']}.ipynb")
        return nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001: never a crash of the conversion
        return None


def nbgrader_api(course_root):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    config = load_config(course_root)
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def release(course_root, lessons=None, solutions=SOLUTIONS, notebooks=NOTEBOOKS, log=print):
    """Regenerate student notebooks from the solutions with nbgrader's generate_assignment.

    Copies solutions/NN_x.ipynb to <course_root>/source/NN_x/NN_x.ipynb, runs
    generate_assignment, and copies the result to notebooks/ (when `notebooks`
    is not None). Returns the list of generated notebook paths.
    """
    course_root = Path(course_root)
    lessons = lessons or lesson_ids(solutions)
    api = nbgrader_api(course_root)
    written = []
    for lesson in lessons:
        source = Path(solutions) / f"{lesson}.ipynb"
        if not source.exists():
            raise FileNotFoundError(f"lesson: no solution notebook {source}")
        target_dir = step_folder(course_root, "source", lesson)
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target_dir / source.name)
        result = api.generate_assignment(lesson, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment failed for {lesson}:\n{result['error']}\n{result['log']}")
        generated = step_notebook(course_root, "release", lesson)
        if notebooks is not None:
            Path(notebooks).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(generated, Path(notebooks) / source.name)
            generated = Path(notebooks) / source.name
        written.append(generated)
        log(f"released {lesson} -> {generated}")
    return written
