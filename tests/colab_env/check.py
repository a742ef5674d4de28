"""Run solution notebooks in this interpreter's environment and drive every explorer they build.

Meant for the Colab stand-in built by tests/colab_env/build.sh (ipywidgets 7.7.1):

    build/colab-env/bin/python tests/colab_env/check.py [LESSON ...] [--expect-ipywidgets 7.7.1] [--simulated-gpu]

For each lesson (default: every solutions/*.ipynb) it executes the notebook in
fast mode with a kernel running *this* Python, then, inside that same kernel,
finds every explorer object (an instance of a class from
course_utils.explorers), checks it is a displayable widget, and changes each
of its sliders and dropdowns in turn until the explorer re-renders something
different (its HTML or the figures it draws). It fails on any error output, on
an explorer cell with no widget view, on an exception or traceback raised by
an explorer callback, and on an explorer whose display does not change.
Prints one line per lesson and exits 1 on any failure.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
import autograder  # noqa: E402, F401: first, so that nbformat's jsonschema does not build its IRI parsers (lazy_iri.py)
import nbformat  # noqa: E402
from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: E402

from autograder.nbrun import NotebookClient  # noqa: E402: nbclient's, without the missed-reply stalls
SOLUTIONS = REPO / "solutions"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Runs in the notebook's kernel after the last cell. Prints one JSON report line.
PROBE = r'''
def _course_probe():
    import hashlib, json, traceback
    import ipywidgets
    from IPython import get_ipython
    ip = get_ipython()
    published, tracebacks = [], []
    real_publish, real_showtraceback = ip.display_pub.publish, ip._showtraceback

    def publish(data, *args, **kwargs):
        published.append(hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest())
        return real_publish(data, *args, **kwargs)

    def showtraceback(etype, evalue, stb):
        tracebacks.append(f"{etype.__name__}: {evalue}")
        return real_showtraceback(etype, evalue, stb)

    def walk(w):
        yield w
        for child in getattr(w, "children", ()) or ():
            yield from walk(child)

    def snapshot(root):
        html = [w.value for w in walk(root) if isinstance(w, ipywidgets.HTML)]
        return html, list(published)

    report = {"ipywidgets": ipywidgets.__version__, "explorers": []}
    explorers = {}
    for k, v in sorted(globals().items(), key=lambda kv: kv[0].startswith("_")):  # real names before Out's _17
        if type(v).__module__.startswith("course_utils.explorers"):
            explorers.setdefault(id(v), (k, v))
    ip.display_pub.publish, ip._showtraceback = publish, showtraceback
    try:
        for name, explorer in explorers.values():
            entry = {"name": name, "class": type(explorer).__name__, "changed_by": None, "tried": []}
            report["explorers"].append(entry)
            root = getattr(explorer, "widget", explorer)
            if not isinstance(root, ipywidgets.Widget):
                entry["error"] = f"{name}.widget is not an ipywidgets widget"
                continue
            controls = [w for w in walk(root) if isinstance(w, (ipywidgets.Dropdown, ipywidgets.IntSlider,
                                                                ipywidgets.FloatSlider, ipywidgets.SelectionSlider))
                        and not w.disabled]
            for control in controls:
                label = f"{type(control).__name__}({control.description!r})"
                old = control.value
                if isinstance(control, (ipywidgets.Dropdown, ipywidgets.SelectionSlider)):
                    if len(control.options) < 2:
                        continue
                    new_index = (control.index + 1) % len(control.options)
                    change = lambda: setattr(control, "index", new_index)
                    undo = lambda: setattr(control, "value", old)
                else:
                    step = control.step if control.value + control.step <= control.max else -control.step
                    change = lambda: setattr(control, "value", old + step)
                    undo = lambda: setattr(control, "value", old)
                entry["tried"].append(label)
                published.clear()
                change()
                after = snapshot(root)
                published.clear()
                undo()
                back = snapshot(root)
                if after != back:
                    entry["changed_by"] = label
                    break
            entry["tracebacks"] = list(tracebacks)
            tracebacks.clear()
    except Exception as error:
        report["error"] = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    finally:
        ip.display_pub.publish, ip._showtraceback = real_publish, real_showtraceback
    print("@@probe@@" + json.dumps(report))

_course_probe()
'''


def kernel_for_this_python(tmp):
    """A kernelspec named 'course-check' that runs this interpreter (not whatever 'python3' resolves to)."""
    spec = Path(tmp) / "kernels" / "course-check"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "course check", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [tmp, os.environ.get("JUPYTER_PATH")]))
    return "course-check"


def check(lesson, kernel, expect_ipywidgets=None, simulated_gpu=False, timeout=120):
    nb = nbformat.read(str(SOLUTIONS / f"{lesson}.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    os.environ["COURSE_FAST"] = "1"
    if simulated_gpu:  # Colab's GPU runtime: course_utils/device_sim.py, inherited by the kernel
        os.environ["COURSE_DEVICE"] = "sim"
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    started = time.time()
    for attempt in (1, 2):
        try:
            run = nbformat.from_dict(nb)
            NotebookClient(run, timeout=timeout, kernel_name=kernel, allow_errors=True,
                           resources={"metadata": {"path": str(REPO)}}).execute()
            break
        except (CellTimeoutError, DeadKernelError, RuntimeError) as error:
            # a kernel reply lost on a loaded machine leaves both sides idle, and a kernel can die before its
            # first reply (jupyter_client's RuntimeError, seen once in CI while a hostile test loaded the
            # machine): retry once, fresh; any other RuntimeError fails at once
            lost = isinstance(error, (CellTimeoutError, DeadKernelError)) or "before replying" in str(error)
            if attempt == 2 or not lost:
                raise
            print(f"{lesson}: {type(error).__name__}, running it again with a fresh kernel", flush=True)
    nb = run
    elapsed = time.time() - started
    problems = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                problems.append(f"cell {i}: {out.ename}: {out.evalue}")
    text = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []) if o.output_type == "stream")
    if "@@probe@@" not in text:
        return elapsed, problems + ["the explorer probe printed no report"], {}
    report = json.loads(text.split("@@probe@@", 1)[1].splitlines()[0])
    if report.get("error"):
        problems.append(f"driving the explorers raised:\n{report['error']}")
    if expect_ipywidgets and report["ipywidgets"] != expect_ipywidgets:
        problems.append(f"the kernel ran ipywidgets {report['ipywidgets']}, expected {expect_ipywidgets}")
    explorer_cells = [i for i, c in enumerate(nb.cells[:-1]) if c.cell_type == "code"
                      and "course_utils.explorers" in c.source]
    for i in explorer_cells:
        if not any(WIDGET_VIEW in o.get("data", {}) for o in nb.cells[i].get("outputs", [])):
            problems.append(f"cell {i} builds an explorer but displays no widget view")
    if explorer_cells and not report["explorers"]:
        problems.append("explorer cells ran but no explorer object was found in the notebook's namespace")
    for entry in report["explorers"]:
        if entry.get("error"):
            problems.append(entry["error"])
        elif entry["tracebacks"]:
            problems.append(f"explorer {entry['name']} raised in a callback: {entry['tracebacks']}")
        elif entry["changed_by"] is None:
            problems.append(f"explorer {entry['name']} ({entry['class']}): changing {entry['tried'] or 'nothing'} "
                            "did not change what it displays")
    return elapsed, problems, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--expect-ipywidgets", default=None, help="fail unless the kernel runs this ipywidgets version")
    parser.add_argument("--simulated-gpu", action="store_true",
                        help="run as on Colab's GPU runtime: COURSE_DEVICE=sim (course_utils/device_sim.py)")
    args = parser.parse_args(argv)
    lessons = args.lessons or sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]_*.ipynb"))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        kernel = kernel_for_this_python(tmp)
        for lesson in lessons:
            elapsed, problems, report = check(lesson, kernel, args.expect_ipywidgets, args.simulated_gpu)
            explorers = ", ".join(f"{e['name']} <- {e['changed_by']}" for e in report.get("explorers", []))
            status = "FAIL" if problems else "ok"
            device = ", simulated GPU" if args.simulated_gpu else ""
            print(f"{status} {lesson} ({elapsed:.0f} s, ipywidgets {report.get('ipywidgets')}{device}): "
                  f"explorers: {explorers or 'none'}")
            for problem in problems:
                print(f"    {problem}")
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
