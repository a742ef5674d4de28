"""Reading a notebook does not build rfc3987_syntax's parsers, and jsonschema still judges IRIs as before."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("rfc3987_syntax", reason="rfc3987_syntax is not installed: nothing to defer")

IRIS = ["http://example.com/ä?x=1", "https://例え.jp/パス#f", "not an iri", "http://[::1]:80/", "../relative", ""]
JUDGE = f"""
import json, sys, jsonschema
checker = jsonschema.FormatChecker()
print(json.dumps([[checker.conforms(v, f) for f in ("iri", "iri-reference")] for v in {IRIS!r}]))
"""


def _run(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_autograder_reads_a_notebook_without_building_the_iri_parsers():
    out = _run("import sys, autograder, nbformat\n"
               "nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')]))\n"
               "print('rfc3987_syntax.syntax_helpers' in sys.modules)")
    assert out.strip() == "False"


def test_jsonschema_judges_every_iri_as_it_does_without_the_stand_in():
    deferred = json.loads(_run("import autograder\n" + JUDGE))
    real = json.loads(_run(JUDGE))
    assert deferred == real
    assert [True, True] in real and [False, False] in real  # the real checker ran: some pass, some fail
