"""What collect reads at most, and how close two times are the same time: one place for every cap.

Modules read these as `limits.NAME` when they run, so a test can lower a cap for one run."""
from datetime import timedelta

MAX_NESTED_ZIP = 3                   # zips inside zips inside zips
MAX_FILE_BYTES = 100 * 2**20         # a notebook (or a zip inside the collection) bigger than this is not read
MAX_ARCHIVE_BYTES = 2 * 2**30        # uncompressed bytes read out of one zip, the zips inside it included
MAX_ENTRIES = 50_000                 # entries of one zip (the zips inside it included), or files of one folder
MAX_DEPTH = 64                       # folders inside folders
CHUNK = 1 << 20                      # bytes read at a time
SAME_TIME = timedelta(seconds=2)     # zip times have a 2-second resolution
