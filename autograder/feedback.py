"""`feedback`: HTML feedback pages that show no hidden test and run nothing in the reader's browser.

What each output of a page may show is preprocessors/hidehiddentests.py's (HideHiddenTests, first in
GenerateFeedback.preprocessors). This module makes the pages safe to open:

What the reader's browser runs: nothing. SafeFeedbackExporter (GenerateFeedback.exporter_class)
sanitises the FINAL HTML, after nbconvert and nbgrader's template have run: the head is
rebuilt from the template's style sheets (with every url() and @import removed) and a
Content-Security-Policy that allows no script and no load from anywhere but data: images;
the body goes through an allow-list (bleach): ALLOWED_TAGS, the attributes of each tag,
links only to http, https, mailto or within the page, images only as base64 PNG, JPEG or
GIF data, inline styles only without url(), expression() or escapes. An image it must drop (the lesson's
"Open in Colab" badge, loaded from the network) becomes its alt text, not a broken image.

Mathematics is rendered on the grader's side, since no script may typeset it in the browser: each `$...$` and
`$$...$$` in the page's text (never in code or outputs) becomes MathML (latex2mathml), which browsers draw
themselves, and that MathML goes through an allow-list of its own (MATHML_TAGS, MATHML_ATTRIBUTES) like the rest.
"""
import functools
import html
import re

from nbconvert.exporters import HTMLExporter

from .course import load_config, submissions

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
ALLOWED_TAGS = frozenset("""a abbr b blockquote br caption cite code col colgroup dd del details dfn div dl dt em
    figcaption figure h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp small span strong sub summary
    sup table tbody td tfoot th thead tr tt u ul var""".split())
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})  # for links; images: only IMAGE_SOURCE
IMAGE_SOURCE = re.compile(r"data:image/(png|jpeg|gif);base64,[a-z0-9+/=]*")
CSS_PROPERTIES = frozenset("""color background-color font-weight font-style font-size font-family text-align
    text-decoration vertical-align white-space line-height width height max-width max-height min-width
    min-height margin margin-top margin-bottom margin-left margin-right padding padding-top padding-bottom
    padding-left padding-right border border-top border-bottom border-left border-right border-color
    border-style border-width border-collapse border-spacing list-style-type""".split())
CSS_FUNCTIONS = ("rgb(", "rgba(", "hsl(", "hsla(")
CSS_FORBIDDEN = ("url(", "expression", "\\", "@", "javascript", "vbscript", "behavior", "binding", "image",
                 "<", ">", "&", "import", "element(", "var(", "attr(")
NAME = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
SIZE = re.compile(r"\d{1,5}(%|px)?")


def _normalise(value):
    """A URL as a browser matches its scheme: entities decoded, controls, spaces and non-ASCII out, lower case."""
    value = html.unescape(value)
    value = re.sub(r"[`\x00-\x20\x7f-\xa0\s]+", "", value)
    return re.sub(r"[^\x00-\x7f]", "", value).lower()


def _link_allowed(value):
    url = _normalise(value)
    if url.startswith("#"):
        return True
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", url)
    return bool(scheme) and scheme.group(1) in ALLOWED_PROTOCOLS


def _style_allowed(value):
    css = re.sub(r"/\*.*?\*/", "", html.unescape(value), flags=re.S).lower()
    css = re.sub(r"\s+", "", css)
    if any(bad in css for bad in CSS_FORBIDDEN):
        return False
    for function in CSS_FUNCTIONS:
        css = css.replace(function, "")
    return "(" not in css


ATTRIBUTES = {  # tag -> {attribute: check of its value}; "*": every allowed tag
    "*": {"class": lambda v: True, "title": lambda v: True, "id": NAME.fullmatch, "style": _style_allowed},
    "a": {"href": _link_allowed, "name": NAME.fullmatch},
    "img": {"src": lambda v: bool(IMAGE_SOURCE.fullmatch(_normalise(v))), "alt": lambda v: True,
            "width": lambda v: bool(SIZE.fullmatch(v.strip())), "height": lambda v: bool(SIZE.fullmatch(v.strip()))},
    "td": {"colspan": str.isdigit, "rowspan": str.isdigit, "align": lambda v: v.lower() in ("left", "right", "center")},
    "th": {"colspan": str.isdigit, "rowspan": str.isdigit, "align": lambda v: v.lower() in ("left", "right", "center")},
    "ol": {"start": str.isdigit},
    "table": {"border": str.isdigit},
}


def _attribute_allowed(tag, name, value):
    check = ATTRIBUTES.get(tag, {}).get(name) or ATTRIBUTES["*"].get(name)
    return bool(check and check(value))


MATHML_TAGS = frozenset("""math mrow mi mn mo ms mtext mspace msup msub msubsup mfrac msqrt mroot mover munder
    munderover mtable mtr mtd mstyle mpadded mphantom menclose semantics annotation""".split())
MATHML_VALUE = re.compile(r"[A-Za-z0-9 .%#+-]{0,40}")
MATHML_ATTRIBUTES = frozenset("""display mathvariant stretchy fence separator lspace rspace movablelimits accent
    accentunder columnalign columnspacing rowspacing width height depth minsize maxsize form largeop symmetric
    scriptlevel displaystyle linethickness notation""".split())
MAX_FORMULA_CHARS = 2000
MATH = re.compile(r"\$\$([^$]{1,%d})\$\$|\$([^$]{1,%d})\$" % (MAX_FORMULA_CHARS, MAX_FORMULA_CHARS))
MATH_FREE = ("pre", "code", "samp", "kbd", "tt")  # text inside these is code or output, never mathematics


@functools.lru_cache(maxsize=1)
def _mathml_cleaner():
    from bleach.sanitizer import Cleaner
    allowed = lambda tag, name, value: name in MATHML_ATTRIBUTES and bool(MATHML_VALUE.fullmatch(value))  # noqa: E731
    return Cleaner(tags=MATHML_TAGS, attributes=allowed, protocols=(), strip=True, strip_comments=True)


def _formula(latex, display):
    """One formula as allow-listed MathML, or None where latex2mathml cannot read it (the text then stays)."""
    import latex2mathml.converter
    try:
        mathml = latex2mathml.converter.convert(html.unescape(latex).strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001: any formula it cannot convert is shown as written
        return None
    return _mathml_cleaner().clean(_RAW_TEXT.sub("", mathml))


MAX_FORMULAS = 2000  # a page's first (a lesson has at most 300); the rest stay as written, so no page takes long


def render_math(body):
    """The cleaned body with the formulas in its text (outside MATH_FREE elements) as MathML."""
    parts, inside, out, budget = re.split(r"(<[^>]*>)", body), [], [], [MAX_FORMULAS]

    def rendered(match):
        budget[0] -= 1
        mathml = budget[0] >= 0 and _formula(match.group(1) or match.group(2), bool(match.group(1)))
        return mathml or match.group(0)

    for part in parts:
        tag = re.match(r"<(/?)([a-zA-Z0-9]+)", part)
        if tag:
            name = tag.group(2).lower()
            if name in MATH_FREE and not part.endswith("/>"):
                if tag.group(1):
                    if name in inside:
                        inside.remove(name)
                else:
                    inside.append(name)
            out.append(part)
        elif inside or "$" not in part:
            out.append(part)
        else:
            out.append(MATH.sub(rendered, part))
    return "".join(out)


def _cleaner():
    from bleach.css_sanitizer import CSSSanitizer
    from bleach.sanitizer import Cleaner
    # bleach drops a URL whose scheme is not in `protocols` after our checks: "data" is listed so that images
    # (checked against IMAGE_SOURCE) survive; links are held to ALLOWED_PROTOCOLS by _link_allowed
    return Cleaner(tags=ALLOWED_TAGS, attributes=_attribute_allowed, protocols=ALLOWED_PROTOCOLS | {"data"},
                   strip=True, strip_comments=True,
                   css_sanitizer=CSSSanitizer(allowed_css_properties=CSS_PROPERTIES, allowed_svg_properties=()))


_RAW_TEXT = re.compile(r"<(script|style|template|noscript|textarea|title|iframe|noembed|noframes|xmp)\b[^>]*>"
                       r".*?</\1\s*>", re.S | re.I)


_IMAGE_FROM_ELSEWHERE = re.compile(r"<img\b[^>]*>", re.I)


def _attribute(tag, name):
    """The raw value of attribute `name` in an HTML start tag (quoted either way or bare), or None."""
    found = re.search(rf"""\b{name}\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", tag, re.I)
    return next(g for g in found.groups() if g is not None) if found else None


def _alt_text(match):
    """An image the page cannot show (any source but IMAGE_SOURCE's data) as its alt text; one it can, unchanged."""
    tag = match.group(0)
    source = _attribute(tag, "src")
    if source is not None and IMAGE_SOURCE.fullmatch(_normalise(source)):
        return tag
    return html.escape(html.unescape(_attribute(tag, "alt") or ""))


# a failed test's message wraps at the page's width instead of running off to the right in one line
WRAP_MESSAGES = ".jp-OutputArea-output pre, .output_error pre {white-space: pre-wrap; overflow-wrap: anywhere}"


def _template_css(css):
    """The template's own style sheet, loading nothing: no @import, no url() (fonts, images)."""
    css = re.sub(r"@import[^;]*;?", "", css, flags=re.I)
    css = re.sub(r"url\s*\([^)]*\)", "none", css, flags=re.I)
    css = re.sub(r"expression\s*\(", "(", css, flags=re.I)
    return css.replace("</", "<\\/")


def sanitize_page(page):
    """The final feedback HTML, safe to open: a rebuilt head (styles, CSP) and an allow-listed body.

    The template writes the head before any cell, so everything up to the first `</head>` is the
    template's; only its <title> text and <style> sheets are kept. Everything after it goes
    through the allow-list, whatever it claims to be.
    """
    end = page.lower().find("</head>")
    head, body = (page[:end], page[end:]) if end >= 0 else ("", page)
    title = re.search(r"<title>(.*?)</title>", head, re.S | re.I)
    title = html.escape(html.unescape(re.sub(r"<[^>]*>", "", title.group(1))).strip()) if title else "Feedback"
    styles = [_template_css(s) for s in re.findall(r"<style[^>]*>(.*?)</style\s*>", head, re.S | re.I)]
    body = render_math(_cleaner().clean(_RAW_TEXT.sub("", _IMAGE_FROM_ELSEWHERE.sub(_alt_text, body))))
    return "\n".join([
        "<!DOCTYPE html>", "<html>", "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="referrer" content="no-referrer">', f"<title>{title}</title>",
        *[f"<style>{s}</style>" for s in styles], f"<style>{WRAP_MESSAGES}</style>", "</head>", "<body>", body,
        "</body>", "</html>", ""])


class SafeFeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter (with nbgrader's feedback template) whose final page is sanitize_page'd."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return sanitize_page(output), resources


def generate_feedback(course_root, lessons=None, students=None, log=print):
    """HTML feedback in course_root/feedback/<student>/<lesson>/ for every autograded submission."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    config = load_config(course_root)  # the course's: GenerateFeedback's preprocessors and exporter
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    written = []
    for paths in submissions(course_root, lessons, students, step="autograded"):
        result = api.generate_feedback(paths.lesson, paths.student, force=True)
        if result["success"]:
            written += sorted(paths.feedback.glob("*.html"))
            log(f"feedback {paths.lesson} {paths.student} -> {paths.feedback}")
        else:
            log(f"feedback {paths.lesson} {paths.student} FAILED: "
                f"{(result['error'] or result['log']).strip()[-500:]}")
    return written
