"""The instructor's side of the course: nbgrader configuration and command line."""
from . import lazy_iri

lazy_iri.defer()  # before anything imports nbformat (lazy_iri.py says why)
