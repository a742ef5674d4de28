"""jsonschema's IRI checker, loaded the first time an IRI is checked instead of whenever a notebook is read.

nbformat imports jsonschema, and jsonschema imports rfc3987_syntax when it is installed (jupyter_events asks for
`jsonschema[format-nongpl]`, which installs it). rfc3987_syntax builds about thirty Earley parsers as it is
imported: 0.9 CPU-s measured on a 2-core machine, in every process that reads a notebook (the command line, each
grading zygote, the test workers), for the `iri` formats that no notebook schema uses. `defer()` stands a small
module in for it; jsonschema's checker calls the real one, loaded then, so an IRI is judged exactly as before.
The autograder, tools and tests packages call it as they are imported, before anything imports nbformat.
"""
import importlib
import importlib.util
import sys
import types

NAME = "rfc3987_syntax"


def defer():
    """Put the stand-in in sys.modules, unless rfc3987_syntax is absent or already imported."""
    spec = None if NAME in sys.modules else importlib.util.find_spec(NAME)
    if spec is None:
        return
    stand_in = types.ModuleType(NAME)
    stand_in.__path__ = list(spec.submodule_search_locations)  # its submodules load from the package as usual
    stand_in.is_valid_syntax = _is_valid_syntax  # what jsonschema imports by name, as it is imported
    stand_in.__getattr__ = _real_attribute  # anything else anyone asks of it
    sys.modules[NAME] = stand_in


def _helpers():
    return importlib.import_module(f"{NAME}.syntax_helpers")  # the parsers are built here, once


def _is_valid_syntax(term, value):
    return _helpers().is_valid_syntax(term, value)


def _real_attribute(name):
    return getattr(_helpers(), name)
