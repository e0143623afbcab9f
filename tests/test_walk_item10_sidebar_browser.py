"""Issue #46 item 10: the sidebar shows every page of app.py, none folded behind "View N more"."""

import re

from tests.browser import BROWSER_TESTS, keep_screenshot, launch, open_page, streamlit_server
from tests.conftest import APP_FILE

pytestmark = BROWSER_TESTS


def page_titles() -> list[str]:
    """Every page title app.py lists (st.Page(..., title="...")), in its order."""
    return re.findall(r'st\.Page\([^)]*?title="([^"]+)"', open(APP_FILE).read(), re.DOTALL)


def test_the_sidebar_lists_every_page_with_nothing_folded_away():
    from playwright.sync_api import sync_playwright

    titles = page_titles()
    assert len(titles) >= 15  # the parse found app.py's list
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(page, f"{url}/start")
        nav = page.locator('[data-testid="stSidebarNav"]')
        shown = [link.inner_text().strip() for link in nav.locator("a").all()]
        keep_screenshot(page, "sidebar_1280")
        missing = [title for title in titles if not any(title in text for text in shown)]
        assert not missing, f"not in the sidebar: {missing}; shown: {shown}"
        assert not re.search(r"View \d+ more", nav.inner_text()), nav.inner_text()
        browser.close()
