# nbgrader's own tools started from the repository root (formgrader in `jupyter lab`,
# the `nbgrader` command) use the course in course/ with the course's configuration
# (autograder/nbgrader_config.py). AUTOGRADER_COURSE names another course directory;
# formgrader needs it inside the folder that jupyter serves.
import os

c = get_config()  # noqa: F821  (provided by traitlets when the file is loaded)
_here = os.path.dirname(os.path.abspath(__file__))  # noqa: F821  (set by traitlets)
load_subconfig(os.path.join(_here, "autograder", "nbgrader_config.py"))  # noqa: F821
c.CourseDirectory.root = os.environ.get("AUTOGRADER_COURSE") or os.path.join(_here, "course")

# formgrader's grading page loads MathJax 2 from a CDN (`{{ mathjax() }}` in nbgrader's
# "formgrade" template; no setting changes it, and it stops the page's keyboard navigation
# when offline). nbconvert also looks for a template's files in the Jupyter data path, so
# autograder/jupyter/nbconvert/templates/formgrade/mathjax.html.j2 takes MathJax from the
# Jupyter server instead (the jupyter-server-mathjax package).
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    [os.path.join(_here, "autograder", "jupyter")] + [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p])
