"""Sphinx configuration of the course website (built by `python -m tools.site build`).

The pages are the student notebooks, carrying the outputs of a full-mode run of
the solutions (see tools/site.py). Nothing is fetched from the network, at build
time or when a page is read: the theme ships its own assets, MathJax is served
from the sphinx-mathjax-offline package, notebook widget JavaScript is switched
off (explorers are shown as their first picture), and the Colab badge is a local
SVG.
"""
project = "Attention, from the bottleneck up"
author = "the course's authors"
copyright = "the course's authors, MIT licence"

extensions = ["myst_nb", "sphinx-mathjax-offline"]

# notebooks arrive executed (tools/site.py runs and caches them): never run a kernel here
nb_execution_mode = "off"
# no widget JavaScript from a CDN: tools/site.py replaces each explorer by its first picture
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
# Sphinx writes _static/pygments.css in this style, and the theme then overwrites it with its light and dark
# styles (pydata-sphinx-theme, at build-finished): a page loaded between the two, during any build of the
# folder, even one with nothing to rebuild, gets this style. The theme's own choice, tango, has strings at
# 3.2:1 on the code background (below AA), so both files carry the theme's accessible light style.
pygments_style = "a11y-high-contrast-light"
html_title = project
html_copy_source = False          # the pages are the only copy; no _sources/ with raw cells
html_show_sourcelink = False
html_last_updated_fmt = None
html_static_path = ["_static"]
# the theme's search button, with its accessible name taken from what it shows ("Search Ctrl+K"): axe-core's
# label-content-name-mismatch rule (WCAG 2.5.3) fails the theme's own button, named "Search" only
templates_path = ["_templates"]
html_css_files = ["course.css"]
# a fixed light mode: with none set, the theme's script logs an error on a reader's first visit
html_context = {"default_mode": "light"}
html_theme_options = {
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "home_page_in_toc": True,
    "pygments_light_style": pygments_style,
}
