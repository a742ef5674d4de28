"""The grading worker: one submission, in a process of its own (the job's protocol is job.py's)."""
import json
import sys
from pathlib import Path

from ..job import HANG, Job, JobFolder, event, read_events


def launcher_settings(job):
    """The launcher's settings: the job's sandbox features and its share of the job's limits."""
    from ..sandbox.limits import Limits
    return {**job.sandbox, **Limits(**job.limits).for_the_sandbox()}


def work(job):
    """Autograde one submission (a job.Job) into its shard gradebook."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from ..sandbox.limits import Limits
    from .settings import grading_config
    config = grading_config(job.course, job.gradebook_url, Limits(**job.limits), launcher_settings(job))
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.autograde(job.lesson, job.student, force=True, create=True)
    return {"success": bool(result["success"]), "error": result.get("error") or "", "log": result.get("log") or ""}


def work_retrying_a_hang(job):
    """work(job); a kernel hang (a cell that never started) is graded again once in a fresh kernel,
    and a second one fails the job as the grader's fault: never a zero the student earned."""
    outcome = work(job)
    folder = JobFolder.current()
    hung = [e for e in read_events(folder.events) if e.kind == HANG] if folder else []
    if not hung:
        return outcome
    folder.events.replace(folder.hung_events)  # the first run's events, kept beside the report
    event(HANG, f"graded again in a fresh kernel after the first run's {hung[0].text}", hung[0].cell)
    outcome = work(job)
    again = [e for e in read_events(folder.events) if e.kind == HANG][1:]
    if again:
        return {"success": False, "log": outcome["log"], "error": f"the grader's fault, not the student's: "
                f"the kernel hung twice ({again[0].text}); run grade again"}
    return outcome


def main(job_file):
    """The worker: grade the job in `job_file`, write result.json beside it."""
    folder = JobFolder(Path(job_file).parent)
    outcome = work_retrying_a_hang(Job.from_json(folder.job.read_text()))
    folder.result.write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
