"""The grading worker: one submission, in a process of its own, and the protocol it speaks with the parent.

The parent (grading.py) writes a job folder `<course>/.grading/<lesson>/<student>/` and asks a
warm zygote (zygote.py) to fork a worker that runs `main(job.json)`. The folder is the whole
protocol; each file has one writer:

| file          | written by             | holds                                                         |
|---------------|------------------------|---------------------------------------------------------------|
| `job.json`    | parent, before         | course, lesson, student, shard gradebook URL, limits, sandbox |
| `gradebook.db`| parent, then nbgrader  | a private copy of the course gradebook (the shard)            |
| `events.txt`  | worker (`event`)       | one line per thing that happened: timeouts, dead kernels,     |
|               |                        | integrity changes, hangs; the parent turns some into flags    |
| `kernels.txt` | worker (`record_kernel`)| the kernel's process group, so the parent can stop it        |
| `result.json` | worker, at the end     | {"success", "error", "log"} of nbgrader's autograde           |
| `worker.log`  | the worker's stdout    | kept for review when grading failed                           |

`AUTOGRADER_EVENTS` (set by the parent) names `events.txt`; without it (plain nbgrader) events
go nowhere.
"""
import json
import os
import sys
from pathlib import Path

HANG = "hang:"  # events of a kernel that stopped answering (see work_retrying_a_hang)


def event(text):
    """Append one event line for the parent (a no-op outside a grading job)."""
    path = os.environ.get("AUTOGRADER_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def record_kernel(km):
    """Note the kernel's process id beside the events, so that the parent can stop it on Ctrl-C."""
    path = os.environ.get("AUTOGRADER_EVENTS")
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    if path and pid:
        with open(Path(path).with_name("kernels.txt"), "a") as f:
            f.write(f"{pid}\n")


def work(job):
    """Autograde one submission into the shard gradebook named in `job`."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from .grading import Limits, grading_config
    limits = Limits(**job["limits"])
    config = grading_config(job["course"], job["db_url"], limits, job["sandbox"])
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.autograde(job["lesson"], job["student"], force=True, create=True)
    return {"success": bool(result["success"]), "error": result.get("error") or "", "log": result.get("log") or ""}


def work_retrying_a_hang(job):
    """work(job); a kernel hang (a cell that never started) is graded again once in a fresh kernel,
    and a second one fails the job as the grader's fault: never a zero the student earned."""
    outcome = work(job)
    events = Path(os.environ.get("AUTOGRADER_EVENTS", os.devnull))
    hung = [e for e in (events.read_text().splitlines() if events.is_file() else []) if e.startswith(HANG)]
    if not hung:
        return outcome
    events.replace(events.with_name("events-hung.txt"))  # the first run's events, kept beside the report
    event(f"{HANG} graded again in a fresh kernel after the first run's {hung[0][len(HANG):].strip()}")
    outcome = work(job)
    again = [e for e in events.read_text().splitlines() if e.startswith(HANG)][1:]
    if again:
        return {"success": False, "log": outcome["log"], "error": f"the grader's fault, not the student's: "
                f"the kernel hung twice ({again[0][len(HANG):].strip()}); run grade again"}
    return outcome


def main(job_file):
    """The worker: grade the job in `job_file`, write result.json beside it."""
    job_file = Path(job_file)
    outcome = work_retrying_a_hang(json.loads(job_file.read_text()))
    (job_file.parent / "result.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
