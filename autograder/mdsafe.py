"""Markdown that shows text as it is: what `export` and `collect` write into summary.md.

A flag can quote what a submission printed or raised, and a file name comes from the student's zip: in
Markdown either could open a tag, a link (`javascript:`), an image or a table cell. md_code puts text in
a code span (shown exactly, read as nothing else); md_text escapes it where a code span cannot go.
"""
import re


def md_text(text, limit=600):
    """`text` as literal Markdown text: every ASCII punctuation mark escaped (so no tag, link, image, emphasis or
    table cell can start), line breaks and control characters as spaces, at most `limit` characters. The
    grader's own words and the kernel's alike: a flag may quote what a submission printed or raised."""
    text = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in str(text)[:limit])
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def md_code(text, limit=600):
    """`text` as a Markdown code span: shown exactly, never read as HTML, a link or emphasis (its fence is one
    backtick longer than any run of backticks inside); line breaks and control characters as spaces."""
    text = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in str(text)[:limit])
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""  # CommonMark drops one space each side
    return f"{fence}{pad}{text}{pad}{fence}"
