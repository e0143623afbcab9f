"""Helpers to drive the real app in Debian's Chromium with Playwright (see ../shared/TESTING.md).

Used by the browser tests. Nothing here downloads a
browser: without /usr/bin/chromium the browser tests skip and say how to install it.
"""

from __future__ import annotations

import ast
import atexit
import os
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from inference.core.app_process import START_TIMEOUT_S, running_app
from inference.core.app_process import free_port as free_port  # the browser and load tests import it from here

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SKIP_REASON = "Chromium not installed: apt-get install chromium (Debian) to run the browser tests"
# Waits sized for a loaded 2-core machine (the suite runs beside other jobs, Chromium and the app share the cores):
# Playwright's own 30 s default timed out a llama-server Step that passes alone in seconds. Every page a test opens
# through `launch` waits this long for an action, a selector or a function before failing.
ACTION_TIMEOUT_MS = 180_000
NAVIGATION_TIMEOUT_MS = 240_000
SERVER_START_S = START_TIMEOUT_S  # the app's first import of torch and transformers, on a busy machine
# The two screens every page is checked on: a laptop or a projector, and a narrow window (half a laptop's screen).
SCREENS = ((1280, 900), (800, 1000))


def page_paths() -> list[str]:
    """Every page's URL path in app.py's SECTIONS ("" for the default page), read from its source."""
    paths = []
    for node in ast.walk(ast.parse((PROJECT_ROOT / "app.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page":
            options = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            paths.append("" if options.get("default") else options["url_path"])
    return paths


def chromium_available() -> bool:
    return Path(CHROMIUM).exists()


# `pytestmark = BROWSER_TESTS` in a browser test module: its tier, and a skip that says how to install Chromium.
BROWSER_TESTS = [pytest.mark.browser, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]


def shots_folder() -> Path | None:
    """Where browser tests keep screenshots for a person to look at: $INFERENCE_LAB_SHOTS (never the repo). Unset (as
    in CI) they take none: each full-page one took seconds, about two minutes of the browser tier, into a temporary
    folder nobody opened."""
    folder = os.environ.get("INFERENCE_LAB_SHOTS")
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder)


def keep_screenshot(page, name: str, full: bool = True) -> None:
    """`<shots_folder()>/<name>.png` of the whole page (`full`) or of the screen as it is; nothing without a folder."""
    folder = shots_folder()
    if folder is None:
        return
    if full:
        full_screenshot(page, folder / f"{name}.png")
    else:
        page.screenshot(path=str(folder / f"{name}.png"))


@contextmanager
def streamlit_server(env_extra: dict | None = None):
    """Start `streamlit run app.py` on a free loopback port; yield its base URL; stop it."""
    with running_app(env_extra, SERVER_START_S) as app:
        yield app.url


_SHARED_SERVERS: dict[tuple, str] = {}
_SHARED_STACK = ExitStack()
atexit.register(_SHARED_STACK.close)


@contextmanager
def shared_server(env_extra: dict | None = None):
    """The app for every test module that needs it with the same environment: started on first use, stopped when the
    test process exits. A server and its first model load cost 15-30 s; most browser modules need the same app.
    What a page keeps for everyone (a finished measurement) carries over between modules, as between visitors: a test
    that needs a page without it starts its own `streamlit_server`."""
    key = tuple(sorted((env_extra or {}).items()))
    if key not in _SHARED_SERVERS:
        _SHARED_SERVERS[key] = _SHARED_STACK.enter_context(streamlit_server(env_extra))
    yield _SHARED_SERVERS[key]


def launch(playwright):
    """Debian's Chromium, headless; its pages and contexts wait ACTION_TIMEOUT_MS / NAVIGATION_TIMEOUT_MS."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    new_page, new_context = browser.new_page, browser.new_context

    def sized(target):
        target.set_default_timeout(ACTION_TIMEOUT_MS)
        target.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
        return target

    browser.new_page = lambda *args, **kwargs: sized(new_page(*args, **kwargs))
    browser.new_context = lambda *args, **kwargs: sized(new_context(*args, **kwargs))
    return browser


def wait_idle(page, timeout: float = ACTION_TIMEOUT_MS) -> None:
    """Wait until the script has finished its rerun (after the change you expect)."""
    page.wait_for_timeout(150)
    page.wait_for_selector(IDLE, timeout=timeout)


def toggle_presenter(page, sidebar_open: bool = False) -> None:
    """Switch presenter mode on from the sidebar and wait until its larger text has taken effect. Presenter mode folds
    the sidebar away (app.py), unless it was opened or closed by hand in this browser before; `sidebar_open` opens it
    again, as a teacher who picks another page does: the narrowest main area presenter mode has."""
    toggle = page.locator('[data-testid="stSidebar"]').get_by_text("Presenter mode").first
    toggle.scroll_into_view_if_needed()
    toggle.click()
    page.wait_for_function("() => getComputedStyle(document.body).fontSize !== '16px'")
    # Streamlit keeps a sidebar opened or closed by hand in this browser so (localStorage) over the app's request
    page.wait_for_function(
        f"() => {SIDEBAR_WIDTH_JS} === 0 || Object.keys(localStorage).some(k => k.startsWith('stSidebarCollapsed-'))"
    )
    wait_idle(page)
    if sidebar_open:
        open_sidebar(page)


SIDEBAR_WIDTH_JS = "document.querySelector('[data-testid=\"stSidebar\"]').getBoundingClientRect().width"


def open_sidebar(page) -> None:
    """Open the sidebar from its chevron, if it is folded away, and wait until it is drawn full width."""
    if page.evaluate(f"() => {SIDEBAR_WIDTH_JS}") > 0:
        return
    page.locator('[data-testid="stExpandSidebarButton"]').first.click()
    page.wait_for_function(f"() => {SIDEBAR_WIDTH_JS} > 200")
    page.wait_for_timeout(400)  # the slide-in animation


def open_page(page, url: str, timeout: float = NAVIGATION_TIMEOUT_MS) -> None:
    """Go to a page and wait until its title is drawn and its script has finished (idle
    alone can come before the first run has started)."""
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout)
    wait_idle(page, timeout)


def full_screenshot(page, path: Path) -> None:
    """Streamlit scrolls inside stMain: grow the viewport to its height first."""
    width = page.viewport_size["width"]
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": max(int(height) + 40, 600)})
    page.wait_for_timeout(400)
    page.screenshot(path=str(path), full_page=True)


class Screen(NamedTuple):
    """One page opened at one size in one mode, as `each_screen` yields it."""

    page: object  # Playwright's Page
    width: int
    height: int
    presenter: bool

    @property
    def mode(self) -> str:
        return "presenter" if self.presenter else "normal"

    @property
    def where(self) -> str:
        """For a failure message or a screenshot's name: '800x1000 presenter'."""
        return f"{self.width}x{self.height} {self.mode}"


def each_screen(browser, url: str, modes=(False, True), sizes=SCREENS, errors: list | None = None):
    """Open `url` on a new page (a new session) at every size, in every mode (False: normal; True: presenter mode,
    switched on from the sidebar), and yield a Screen for each; the page is closed when the caller moves on.
    JavaScript errors of every page are appended to `errors` when it is given."""
    for presenter in modes:
        for width, height in sizes:
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            if errors is not None:
                page.on("pageerror", lambda e: errors.append(str(e)))
            try:
                open_page(page, url)
                if presenter:
                    toggle_presenter(page)
                yield Screen(page, width, height, presenter)
            finally:
                context.close()


def screenshot_each_size(page, name: str, sizes=SCREENS) -> None:
    """A full-page screenshot of the page as it is at every size, `<shots_folder()>/<name>_<width>x<height>.png`
    (none without a folder); the page is left at the first size."""
    if shots_folder() is None:
        return
    for width, height in sizes:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(600)
        wait_idle(page)
        keep_screenshot(page, f"{name}_{width}x{height}")
    page.set_viewport_size({"width": sizes[0][0], "height": sizes[0][1]})
