"""A cell's code as IPython runs it: magics and shell escapes as the calls they become (IPython, else the
standard library). Read by the static flags and by the integrity check."""
import ast

PYTHON_CELL_MAGICS = {"capture", "time", "timeit", "prun", "debug", "python", "python3", "pypy", "writefile", "file"}


def _python(code):
    """The Python that IPython runs for a cell: magics, shell escapes and `x = %magic` lines as the calls
    they become (`get_ipython().run_line_magic('history', '')`), so that nothing hides in IPython syntax.

    The body of a cell magic that holds Python (`%%capture`, `%%time`, `%%writefile x.py`) is kept as
    code, after a line naming the magic; any other body (`%%bash`) is the string IPython passes it as.
    """
    lines = code.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%") \
            and (lines[first].lstrip()[2:].split() or [""])[0] in PYTHON_CELL_MAGICS:
        name = lines[first].lstrip()[2:].split(maxsplit=1)
        call = f"get_ipython().run_cell_magic({(name or [''])[0]!r}, '', '')"
        return "\n".join(lines[:first] + [call] + [_python(chr(10).join(lines[first + 1:]))])
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(code)
    except Exception:  # noqa: BLE001: without IPython, blank what it would have transformed
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines)


def parse(code):
    """AST of a cell as IPython runs it (see _python); None when it does not parse.

    A cell magic whose body is not Python (`%%bash`, `%%html`) is read as IPython runs it: one call
    with the body as a string, which the string checks (`reach:`) still see."""
    for text in (lambda: _python(code), lambda: _ipython_only(code)):
        try:
            return ast.parse(text())
        except (SyntaxError, ValueError):
            continue
    return None


def _ipython_only(code):
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(code)
