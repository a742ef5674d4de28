"""The course's tools for authors (site, Colab badges, notebook authoring)."""
import autograder  # noqa: F401  (before nbformat: autograder/lazy_iri.py)
