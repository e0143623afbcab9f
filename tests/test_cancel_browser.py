"""A long measurement can be cancelled in the browser: /serving's replay (at least the trace's arrival span long,
so the click always lands mid-run) stops at the Cancel button, the page says nothing was kept, and no
llama-server started for it is left running."""

import os

import psutil
import pytest

from tests.browser import SKIP_REASON, chromium_available, launch, open_page, streamlit_server, wait_idle
from tests.test_engines import require_llama_server

pytestmark = [pytest.mark.engine, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def llama_servers_under(pid: int) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children(recursive=True) if "llama-server" in c.name()]


def test_cancel_stops_a_replay_keeps_nothing_and_stops_its_server():
    """Replay (16 requests at 2/s: about 8 s of arrivals), Cancel after 2 s: 'Cancelled' and the not-yet hint
    show, no exception, the app's llama-server is gone; another visitor sees how the shared run ended."""
    require_llama_server()
    from playwright.sync_api import sync_playwright

    with streamlit_server() as url, sync_playwright() as p:
        app_pid = next(c.pid for c in psutil.Process().children() if "streamlit" in " ".join(c.cmdline()))
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(page, f"{url}/serving")
        page.get_by_role("button", name="Replay the trace").first.click()  # the 1-vs-N replay (not the two-engine one)
        page.get_by_role("button", name="Cancel").wait_for(timeout=60_000)
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=\"stProgress\"]')].some(e => /request/.test(e.innerText))",
            timeout=60_000,
        )  # the replay itself has started (its server is up)
        assert llama_servers_under(app_pid), "the replay's llama-server should be running"
        page.get_by_role("button", name="Cancel").click()
        page.get_by_text("Cancelled: nothing from that run was kept.").wait_for(timeout=60_000)
        wait_idle(page)
        assert page.get_by_text("Cancelled: nothing from that run was kept.").count() == 1
        assert page.get_by_text("Nobody has replayed this trace").count() >= 1  # the two-engine section says it too
        assert page.locator('[data-testid="stException"]').count() == 0
        # stopped, not gone at once: the app sends SIGTERM and waits up to 10 s for the exit (`lifetime.stop_process`)
        for _ in range(30):
            if not llama_servers_under(app_pid):
                break
            page.wait_for_timeout(500)
        assert not llama_servers_under(app_pid), "cancelling must stop the llama-server it started"
        # a background run is shared: another visitor opening the page is told how it ended, too
        other = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(other, f"{url}/serving")
        assert other.get_by_text("Cancelled: nothing from that run was kept.").count() == 1
        browser.close()
