"""Markdown that shows text as it is: what `export` and `collect` write into summary.md.

A flag can quote what a submission printed or raised, and a file name comes from the student's zip: in
Markdown either could open a tag, a link (`javascript:`), an image or a table cell. md_code puts text in
a code span (shown exactly, read as nothing else); md_text escapes it where a code span cannot go.
"""
import re


def md_text(text, limit=600):
    """`text` as literal Markdown text, for a table cell: every mark that can start a tag, link, image, emphasis,
    code span or cell escaped (an underscore inside a word starts nothing and is left as it is), line breaks and
    control characters as spaces, at most `limit` characters."""
    text = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in str(text)[:limit])
    out = []
    for i, c in enumerate(text):
        inside_word = c == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
        out.append("\\" + c if c in _SPECIAL and not inside_word else c)
    return "".join(out)


_SPECIAL = set("\\`*_[]<>|&!#~$")


def md_code(text, limit=600):
    """`text` as a Markdown code span: shown exactly, never read as HTML, a link or emphasis (its fence is one
    backtick longer than any run of backticks inside); line breaks and control characters as spaces."""
    text = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in str(text)[:limit])
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""  # CommonMark drops one space each side
    return f"{fence}{pad}{text}{pad}{fence}"
