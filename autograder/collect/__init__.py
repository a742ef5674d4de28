"""`collect`: put submissions, in the shapes instructors get them, into nbgrader's submitted/ layout.

Accepted (a folder, or a .zip of one; zips inside are opened too), mixed freely:
- nbgrader's exchange: `.../inbound/<student>+<lesson>+<timestamp>[+...]/<lesson>.ipynb`;
- nbgrader's own layout: `<student>/<lesson>/<file>.ipynb`;
- one folder per student: `<student>/<file>.ipynb` (also LMS folders like `Jane Doe_123_assignsubmission_file_`),
  under any number of wrapping folders shared by every file (`downloads/<student>/...`);
- loose files, when a roster CSV names the student: `doejane_123_02_bahdanau (1).ipynb`.

The lesson comes from the file name, by its name first and its number last: the lesson id
(`02_bahdanau_attention`), else its name (`bahdanau_attention`), else number and first word
(`02_bahdanau`), else a lone two-digit token (`02`); digits glued to letters (`user04`) are never
a lesson number, and a name that fits two lessons is reported, never guessed.

The student comes from the roster when one is given (a row matches when its student_id, or
any other field of three or more characters that no other row shares, appears in the
folder or file name); without a roster, from the student folder's name. Two folder names
that make the same student id (`student a`, `student_a`, `Student_A`) are two people:
both are placed, under `student_a` and `student_a_2`, and the collision is reported.

Two files for one student and lesson: the newer wins, by the exchange timestamp (or the
timestamp.txt of nbgrader's own layout), else by
the file's own time (a zip entry's stored time, never the time of extraction), else by
the download number a browser adds (`02_x (2).ipynb` is newer than `02_x (1).ipynb` and
`02_x.ipynb`). The losing file is listed with the reason, and the log says which was kept
and why. Every file is either placed or listed, with the reason, as not placed (a
problem: exit status 2) or skipped (system files: `__MACOSX/`, `.DS_Store`, Jupyter's
`.ipynb_checkpoints/`). A re-run is idempotent: an unchanged copy is left as it is,
and a copy older than the one already placed never replaces it.

Every student found (and every roster row) is entered in the gradebook, so `export` has a
row for them in every lesson; <course>/collect.json keeps what each run placed and why
the rest was not placed, for `export`'s summary.

Laid out one job per module: `walk` (folders, following nothing) and `archive` (zips, streamed within
caps) read the collection into `entries`; `naming` and `roster` say whose and which lesson a file is;
`choose` picks between two copies; `place` writes submitted/ and collect.json; `run` is one collect run,
start to end; `limits` holds every cap.
"""
from .choose import Candidate
from .entries import Entry, TooLarge
from .naming import download_number, match_lesson, student_id
from .place import MANIFEST, not_placed_summary
from .roster import read_roster
from .run import Collected, collect
from .walk import read_collection

__all__ = ["Candidate", "Collected", "Entry", "MANIFEST", "TooLarge", "collect", "download_number",
           "match_lesson", "not_placed_summary", "read_collection", "read_roster", "student_id"]
