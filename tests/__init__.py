import autograder  # noqa: F401  (before nbformat: autograder/lazy_iri.py)
