"""Helpers to drive the real app in Debian's Chromium with Playwright (see ../shared/TESTING.md). Nothing here
downloads a browser: without /usr/bin/chromium the browser tests skip and say how to install it."""

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
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SKIP_REASON = "Chromium not installed: apt-get install chromium (Debian) to run the browser tests"
# Waits sized for a loaded 2-core machine (Playwright's 30 s default timed out a llama-server Step that passes alone
# in seconds): every page opened through `launch` waits this long for an action or a navigation.
ACTION_TIMEOUT_MS, NAVIGATION_TIMEOUT_MS = 180_000, 240_000
SCREENS = ((1280, 900), (800, 1000))  # a laptop or a projector, and half a laptop's screen
SIDEBAR_WIDTH_JS = "document.querySelector('[data-testid=\"stSidebar\"]').getBoundingClientRect().width"


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


def keep_screenshot(page, name: str, full: bool = True) -> None:
    """`$INFERENCE_LAB_SHOTS/<name>.png` (never the repo) of the whole page or of the screen; none when it is unset
    (in CI a full-page screenshot took seconds, into a folder nobody opened)."""
    folder = os.environ.get("INFERENCE_LAB_SHOTS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    if full:  # Streamlit scrolls inside stMain: grow the viewport to its height first
        height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": page.viewport_size["width"], "height": max(int(height) + 40, 600)})
        page.wait_for_timeout(400)
    page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full)


@contextmanager
def streamlit_server(env_extra: dict | None = None):
    """`streamlit run app.py` on a free loopback port; yields its base URL; stops it."""
    with running_app(env_extra, START_TIMEOUT_S) as app:
        yield app.url


_SHARED_SERVERS: dict[tuple, str] = {}
_SHARED_STACK = ExitStack()
atexit.register(_SHARED_STACK.close)


@contextmanager
def shared_server(env_extra: dict | None = None):
    """The app for every test module with the same environment, started on first use and stopped when the test
    process exits (a server and its first model load cost 15-30 s). What a page keeps for everyone carries over
    between modules, as between visitors: a test that needs a page without it starts its own `streamlit_server`."""
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
    """Presenter mode on from the sidebar, once its larger text has taken effect. It folds the sidebar away unless it
    was opened or closed by hand in this browser (Streamlit keeps that in localStorage); `sidebar_open` opens it again,
    as a teacher who picks another page does: the narrowest main area presenter mode has."""
    toggle = page.locator('[data-testid="stSidebar"]').get_by_text("Presenter mode").first
    toggle.scroll_into_view_if_needed()
    toggle.click()
    page.wait_for_function("() => getComputedStyle(document.body).fontSize !== '16px'")
    page.wait_for_function(
        f"() => {SIDEBAR_WIDTH_JS} === 0 || Object.keys(localStorage).some(k => k.startsWith('stSidebarCollapsed-'))"
    )
    wait_idle(page)
    if sidebar_open:
        open_sidebar(page)


def open_sidebar(page) -> None:
    """Open the sidebar from its chevron, if it is folded away, and wait until it is drawn full width."""
    if page.evaluate(f"() => {SIDEBAR_WIDTH_JS}") > 0:
        return
    page.locator('[data-testid="stExpandSidebarButton"]').first.click()
    page.wait_for_function(f"() => {SIDEBAR_WIDTH_JS} > 200")
    page.wait_for_timeout(400)  # the slide-in animation


def open_page(page, url: str, timeout: float = NAVIGATION_TIMEOUT_MS) -> None:
    """Go to a page and wait until its title is drawn and its script has finished (idle alone can come first)."""
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout)
    wait_idle(page, timeout)


class Screen(NamedTuple):
    """One page opened at one size in one mode, as `each_screen` yields it."""

    page: object  # Playwright's Page
    width: int
    height: int
    presenter: bool

    @property
    def where(self) -> str:
        return f"{self.width}x{self.height} {'presenter' if self.presenter else 'normal'}"


def each_screen(browser, url: str, modes=(False, True), sizes=SCREENS, errors: list | None = None):
    """`url` on a new page (a new session) at every size in every mode (True: presenter mode switched on), a Screen
    each; the page is closed when the caller moves on. JavaScript errors go into `errors` when it is given."""
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
    """A full-page screenshot at every size, `<name>_<width>x<height>.png` (none without a folder)."""
    if not os.environ.get("INFERENCE_LAB_SHOTS"):
        return
    for width, height in sizes:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(600)
        wait_idle(page)
        keep_screenshot(page, f"{name}_{width}x{height}")
    page.set_viewport_size({"width": sizes[0][0], "height": sizes[0][1]})
