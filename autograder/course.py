"""The nbgrader course directory built from solutions/, and the release step."""
import shutil
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
CONFIG_FILE = Path(__file__).resolve().parent / "nbgrader_config.py"


def lesson_ids(solutions=SOLUTIONS):
    """Assignment ids, one per solution notebook: '01_seq2seq_bottleneck', ..."""
    return sorted(p.stem for p in Path(solutions).glob("[0-9][0-9]_*.ipynb"))


def load_config(course_root):
    """The course's nbgrader config with its root set to `course_root`."""
    config = Config(PyFileConfigLoader(CONFIG_FILE.name, path=str(CONFIG_FILE.parent)).load_config())
    config.CourseDirectory.root = str(Path(course_root).resolve())
    return config


def lesson_notebook(config, resources, step):
    """The source (step "source") or release notebook of the submission nbgrader is converting, or None.

    `resources["nbgrader"]` (assignment, notebook) is what nbgrader's converters pass their preprocessors.
    """
    import nbformat
    from nbgrader.coursedir import CourseDirectory
    try:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=config)
        folder = coursedir.source_directory if step == "source" else coursedir.release_directory
        path = Path(coursedir.format_path(folder, ".", info["assignment"]), f"{info['notebook']}.ipynb")
        return nbformat.read(str(path), as_version=4)
    except (KeyError, TypeError, OSError, ValueError):
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
        target_dir = course_root / "source" / lesson
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target_dir / source.name)
        result = api.generate_assignment(lesson, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment failed for {lesson}:\n{result['error']}\n{result['log']}")
        generated = course_root / "release" / lesson / source.name
        if notebooks is not None:
            Path(notebooks).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(generated, Path(notebooks) / source.name)
            generated = Path(notebooks) / source.name
        written.append(generated)
        log(f"released {lesson} -> {generated}")
    return written
