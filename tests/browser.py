"""Drive JupyterLab 4 and Notebook 7 in a real browser (Debian's Chromium through Playwright).

Used by tests/site/test_browser.py. Everything runs on localhost: a Jupyter server
started on a free port with a random token on a temporary copy of the
notebooks, in fast mode, and a headless Chromium with a fresh profile that is
refused every request to another host.
"""
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from tests.processes import dies_with_this_process

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "browser"

# JupyterLab settings for a quiet, deterministic test: no news or update pop-ups,
# every cell kept in the page (no windowing), no autosave racing our own save.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}


def missing_prerequisite():
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """`jupyter lab` or `jupyter notebook` on localhost, serving `root` in fast mode."""

    def __init__(self, app, root, workdir, log_path):
        assert app in ("lab", "notebook")
        self.app, self.root = app, Path(root)
        self.port, self.token = free_port(), secrets.token_hex(16)
        settings = Path(workdir) / "settings"
        for name, values in LAB_SETTINGS.items():
            plugin, file = name.rsplit("/", 1)
            (settings / plugin).mkdir(parents=True, exist_ok=True)
            (settings / plugin / file).write_text(json.dumps(values))
        app_class = "LabApp" if app == "lab" else "JupyterNotebookApp"
        self.argv = [sys.executable, "-m", "jupyter", app, "--no-browser", "--allow-root",
                     f"--{'LabApp' if app == 'lab' else 'JupyterNotebookApp'}.expose_app_in_browser=True",
                     f"--ServerApp.port={self.port}", "--ServerApp.ip=127.0.0.1",
                     f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                     "--ServerApp.port_retries=0",
                     f"--{app_class}.user_settings_dir={settings}",
                     f"--{app_class}.workspaces_dir={Path(workdir) / 'workspaces'}"]
        env = dict(os.environ, COURSE_FAST="1", MPLBACKEND="module://matplotlib_inline.backend_inline")
        env.pop("JUPYTER_PATH", None)
        self.log = open(log_path, "w")
        # in a session of its own, and terminated when this process dies (tests/processes.py): Ctrl-C on the test
        # run, or a run killed, leaves no server and no kernel running
        self.process = subprocess.Popen(**dies_with_this_process(self.argv), stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env, cwd=str(self.root))

    def url(self, path):
        # JupyterLab: `reset` starts from an empty workspace, so earlier tests' tabs are not reopened
        reset = "reset&" if self.app == "lab" else ""
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?{reset}token={self.token}"

    def shutdown_kernels(self):
        for kernel in self._safe(lambda: self.api("kernels")) or []:
            self._safe(lambda: self.api(f"kernels/{kernel['id']}", method="DELETE"))

    def api(self, path, method="GET", body=None):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def wait_ready(self, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter {self.app} exited with {self.process.returncode}: "
                                   f"see {self.log.name}")
            try:
                self.api("status")
                return self
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"jupyter {self.app} did not answer within {timeout} s: see {self.log.name}")

    def stop(self):
        self.shutdown_kernels()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=20)
        self.log.close()

    @staticmethod
    def _safe(call):
        try:
            return call()
        except Exception:
            return None


@contextmanager
def jupyter_server(app, root, workdir, log_path):
    server = JupyterServer(app, root, workdir, log_path)
    try:
        yield server.wait_ready()
    finally:
        server.stop()


@contextmanager
def browser(profile_dir):
    """A headless Chromium context with a fresh profile; requests to other hosts are aborted."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000})
        context.route("**/*", lambda route: route.continue_()
                      if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost")
                      else route.abort())
        try:
            yield context
        finally:
            context.close()


# Errors that are neither ours nor the widgets', each with where it was seen. Matched as (app, text, script).
KNOWN_ERRORS = [
    # Notebook 7.6's own settings loader throws this on every page, its file browser included, before any
    # notebook, kernel or widget exists (seen with and without nbgrader's extension)
    ("notebook", "Cannot read properties of undefined (reading 'schema')", "/static/notebook/notebook_core."),
    # jupyter_server 2.x lists a kernel before it sets the kernel's last_activity (MappingKernelManager.
    # _async_start_kernel), so JupyterLab's periodic poll of the kernel list can land in that window and get a 500
    # (a TraitError in the server's log); the poll is repeated and nothing is lost. Seen once in CI, while the other
    # page's kernel started slowly under load. A kernel that fails to start shows as cells that never run, which
    # wait_run_all reports.
    ("lab", "the server responded with a status of 500", "/api/kernels?"),
]


class ConsoleLog:
    """Console messages and uncaught page errors; failed loads of other hosts' resources are expected."""

    def __init__(self, page, app="lab"):
        self.app, self.page = app, page
        self.messages, self.errors = [], []
        page.on("console", self._console)
        page.on("pageerror", self._uncaught)

    def _uncaught(self, error):
        stack = (error.stack or "").splitlines()
        self.messages.append(f"[uncaught] {error.stack or error}")
        where = next((line.strip() for line in stack[1:] if "at " in line), "")
        if self._known(error.message, where):
            return
        self.errors.append(f"uncaught: {error.message}  ({where})")

    def _console(self, message):
        url = (message.location or {}).get("url", "")
        self.messages.append(f"[{message.type}] {message.text}  ({url})")
        if message.type != "error":
            return
        if message.text.startswith("Failed to load resource") and \
                urlparse(url).hostname not in ("127.0.0.1", "localhost", None):
            return  # the Colab badge image: this test machine is offline on purpose
        if self._known(message.text, url):
            return
        self.errors.append(f"{message.text}  ({url})")

    def close(self):
        """Stop listening (the page goes on to its next notebook, whose messages are that notebook's)."""
        self.page.remove_listener("console", self._console)
        self.page.remove_listener("pageerror", self._uncaught)

    def _known(self, text, where):
        """Whether an error is one of KNOWN_ERRORS: this app's, with that text, from that script or URL."""
        return any(app == self.app and known in text and script in where for app, known, script in KNOWN_ERRORS)

    def write(self, path):
        Path(path).write_text("\n".join(self.messages) + "\n")


# --- the notebook page -------------------------------------------------------------------------------------

# JavaScript: the state of every code cell of the notebook in front (its model, so that cells the page
# has not rendered yet count too): execution count and the errors it shows.
CELL_STATE_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = w.content.widgets.filter(c => c.model.type === 'code').map(c => ({
    count: c.model.executionCount,
    errors: c.model.outputs.toJSON().filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue)}));
  return {idle: !!kernel && kernel.status === 'idle', cells};
}"""

KERNEL_IDLE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""


# JavaScript: close every tab of the JupyterLab in this page (each notebook saved already) and open `path` in it,
# as a student opening the next lesson from the file browser does; the page and the app stay loaded
OPEN_NEXT_JS = """async (path) => {
  const app = window.jupyterapp;
  await app.commands.execute('application:close-all');
  await app.commands.execute('docmanager:open', {path});
}"""


def open_next(page, path_in_root):
    """Open another notebook in the JupyterLab already loaded in `page`, in place of what it showed."""
    page.evaluate(OPEN_NEXT_JS, path_in_root)


def start_run_all(page):
    """Run > Run All Cells from the menu bar, once the notebook is shown and its kernel idle."""
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=180_000, polling=500)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def wait_run_all(page, timeout_s=600):
    """Wait until every code cell has run, or one has failed (JupyterLab stops a Run All at the first error;
    the rest never get a count), and the kernel has stayed idle for 3 s.

    Returns, per code cell, {"count": execution count, "errors": ["ename: evalue", ...]}.
    """
    deadline, idle_since = time.time() + timeout_s, None
    while time.time() < deadline:
        state = page.evaluate(CELL_STATE_JS)
        finished = state["idle"] and (all(c["count"] is not None for c in state["cells"])
                                      or any(c["errors"] for c in state["cells"]))
        if not finished:
            idle_since = None
        elif idle_since is None:
            idle_since = time.time()
        elif time.time() - idle_since >= 3:
            return state["cells"]
        page.wait_for_timeout(500)
    raise TimeoutError(f"Run All Cells did not finish within {timeout_s} s: {state}")


def run_all_cells(page, timeout_s=600):
    """Run > Run All Cells and wait for it (start_run_all, then wait_run_all)."""
    start_run_all(page)
    return wait_run_all(page, timeout_s)


# JavaScript: the explorers on the page. An explorer is an output that holds a widget with a slider or a
# dropdown. Its "display" is everything it shows except its own controls.
EXPLORERS_JS = """() => {
  const outs = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')]
    .filter(o => o.querySelector('.widget-slider, .widget-dropdown'));
  outs.forEach((o, i) => o.setAttribute('data-course-explorer', String(i)));
  return outs.length;
}"""

DISPLAY_JS = """(root) => {
  const parts = [];
  root.querySelectorAll('.widget-html-content, .widget-output .jp-OutputArea-output, .widget-output img')
    .forEach(e => parts.push(e.tagName === 'IMG' ? e.getAttribute('src') : e.innerHTML));
  return parts.join('\\n');
}"""


def explorer_controls(explorer):
    """Sliders and dropdowns of one explorer, in page order, as (kind, locator)."""
    found = []
    count = explorer.locator(".widget-slider, .widget-dropdown").count()
    for i in range(count):
        control = explorer.locator(".widget-slider, .widget-dropdown").nth(i)
        classes = control.get_attribute("class") or ""
        found.append(("dropdown" if "widget-dropdown" in classes else "slider", control))
    return found


def change_control(kind, control):
    """Change a control as a student would; return a description, or None when it cannot change."""
    label = control.locator(".widget-label").first.inner_text().strip() if \
        control.locator(".widget-label").count() else "?"
    if kind == "dropdown":
        select = control.locator("select")
        if select.is_disabled():
            return None
        options = select.locator("option")
        n = options.count()
        if n < 2:
            return None
        current = select.evaluate("s => s.selectedIndex")
        target = (current + 1) % n
        select.select_option(index=target)
        return f"dropdown '{label}' -> {options.nth(target).inner_text()!r}"
    handle = control.locator(".noUi-handle, .ui-slider-handle").first
    if handle.count() == 0:
        return None
    readout = control.locator(".widget-readout").first
    before = readout.inner_text() if readout.count() else ""
    value = lambda: readout.inner_text() if readout.count() else ""
    handle.focus()
    handle.press("ArrowRight")  # the keyboard first, as a student using it would
    if value() == before:  # already at its maximum, or the keys did not reach the handle
        handle.press("ArrowLeft")
        handle.press("ArrowLeft")
    track = control.locator(".noUi-base, .ui-slider").first
    for fraction in (0.8, 0.2):  # then a click on the track, as with a mouse
        if value() != before or track.count() == 0:
            break
        box = track.bounding_box()
        page = control.page
        page.mouse.click(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)
        page.wait_for_timeout(300)
    return f"slider '{label}' {before} -> {value()}"


def wait_until_stable(page, explorer, quiet_s=2.0, timeout_s=30):
    """Wait until what an explorer displays stops changing (a figure may follow its caption)."""
    last, since, deadline = None, time.time(), time.time() + timeout_s
    while time.time() < deadline:
        now = explorer.evaluate(DISPLAY_JS)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet_s:
            return
        page.wait_for_timeout(250)


def exercise_explorers(page, shot_prefix, timeout_s=30):
    """Change one control per explorer (trying each in turn) and check its display changes.

    Returns (list of what changed each explorer, list of problems). Saves before/after screenshots.
    """
    count = page.evaluate(EXPLORERS_JS)
    done, problems = [], []
    for i in range(count):
        explorer = page.locator(f'[data-course-explorer="{i}"]')
        explorer.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        explorer.screenshot(path=f"{shot_prefix}_explorer{i}_before.png")
        changed = None
        tried = []
        for kind, control in explorer_controls(explorer):
            before = explorer.evaluate(DISPLAY_JS)
            what = change_control(kind, control)
            if what is None:
                continue
            tried.append(what)
            try:
                page.wait_for_function(f"([root, before]) => ({DISPLAY_JS})(root) !== before",
                                       arg=[explorer.element_handle(), before], timeout=timeout_s * 1000,
                                       polling=250)
                changed = what
                break
            except Exception:  # playwright's TimeoutError: this control did not change the display
                continue
        wait_until_stable(page, explorer)
        explorer.screenshot(path=f"{shot_prefix}_explorer{i}_after.png")
        if changed:
            done.append(changed)
        else:
            problems.append(f"explorer {i}: changing {tried or 'no control'} left its display unchanged")
    return count, done, problems


DIRTY_JS = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"


def save_with_keyboard(page, server, path_in_root, timeout_s=180):
    """Ctrl+S in the notebook; wait until JupyterLab reports it saved and the server's copy changed."""
    before = server.api(f"contents/{path_in_root}?content=0")["last_modified"]
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    deadline, seen = time.time() + timeout_s, []
    while time.time() < deadline:
        modified = server.api(f"contents/{path_in_root}?content=0")["last_modified"]
        dirty = page.evaluate(DIRTY_JS)
        seen.append((round(time.time() - deadline + timeout_s), modified, dirty))
        if modified != before and not dirty:
            return
        page.wait_for_timeout(1000)
    raise TimeoutError(f"{path_in_root} was not saved within {timeout_s} s of Ctrl+S (before: {before}; "
                       f"(s, last_modified, dirty): {seen[:3]} ... {seen[-3:]})")


def copy_tree(files, root):
    root.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copyfile(f, root / Path(f).name)
