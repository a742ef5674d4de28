"""The instructor's side of the course: nbgrader configuration and command line."""
