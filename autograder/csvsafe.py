"""Safe CSV for spreadsheets: every file the course writes for instructors goes through safe_writer.

Every field is quoted (csv.QUOTE_ALL), so a comma, a quote or a newline in a roster name never
moves a column; and a text field that a spreadsheet would read as a formula (it begins with
= + - @, a tab, a carriage return or a line feed: OWASP's CSV injection) starts with a single
quote instead, so Excel, LibreOffice and Google Sheets show it as text. Numbers stay numbers:
an int or a float, or a string that is a plain decimal number (`5`, `-0.5`, `1e-3`), is written
as it is, so that Canvas and Moodle import the scores.
"""
import csv
import re
from pathlib import Path

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def cell(value):
    """One CSV field: numbers as they are; text that a spreadsheet would run as a formula starts with '."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


class safe_writer:
    """csv.writer with every field quoted and every field passed through cell()."""

    def __init__(self, f):
        self._w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\r\n")

    def writerow(self, row):
        self._w.writerow([cell(v) for v in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        safe_writer(f).writerows(rows)
    return Path(path)
