"""Issue #46 item 7: the teacher's screen, which a class sees projected, hides the model's candidates while
guessing is open and shows them, beside the class's answers, after Draw and reveal."""

import os

from tests.browser import (
    BROWSER_TESTS,
    keep_screenshot,
    launch,
    open_page,
    streamlit_server,
    wait_idle,
)

pytestmark = BROWSER_TESTS

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
CANDIDATES = "What the model could write next"  # the candidates chart's title


def test_the_projected_teacher_view_shows_no_candidates_until_the_reveal(tmp_path):
    from playwright.sync_api import sync_playwright

    with streamlit_server({"INFERENCE_LAB_CLASS_DB": str(tmp_path / "classes.sqlite3")}) as url, sync_playwright() as p:
        browser = launch(p)
        teacher = browser.new_page(viewport={"width": 1280, "height": 900})
        open_page(teacher, f"{url}/class")
        teacher.get_by_role("button", name="Start a class").click()
        teacher.get_by_text("Class code:").wait_for(timeout=120_000)
        wait_idle(teacher)
        teacher.get_by_text(CANDIDATES).first.wait_for(timeout=30_000)  # before guessing: the teacher's preview

        teacher.get_by_role("button", name="Open guessing").click()
        wait_idle(teacher)
        teacher.get_by_text("Guessing is open").first.wait_for(timeout=10_000)
        keep_screenshot(teacher, "class_guessing_1280")
        main = teacher.locator('[data-testid="stMain"]')
        assert main.get_by_text(CANDIDATES).count() == 0, "the projected screen shows the candidates during guessing"
        assert main.locator('[data-testid="stPlotlyChart"]').count() == 0

        teacher.get_by_role("button", name="Draw and reveal").click()
        wait_idle(teacher)
        teacher.get_by_text("the draw (u = ").first.wait_for(timeout=30_000)
        assert main.get_by_text("The class's guesses").count() >= 1
        assert teacher.locator('[data-testid="stException"]').count() == 0
        browser.close()
