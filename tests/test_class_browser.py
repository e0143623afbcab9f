"""Class mode in real Chromium on two app processes sharing one class file: the teacher's Step in one reaches a
student's screen served by the other (how soon is printed, not asserted: the issue's bound is 2 s, a poll a second
plus a redraw); a guess crosses back; the teacher's projected screen hides the model's candidates while guessing is
open and shows them beside the class's answers after Draw and reveal. Screenshots to $INFERENCE_LAB_SHOTS."""

import os

from inference.core.measuring import Stopwatch
from tests.browser import (
    BROWSER_TESTS,
    keep_screenshot,
    launch,
    open_page,
    streamlit_server,
    wait_idle,
)

pytestmark = BROWSER_TESTS

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
CANDIDATES = "What the model could write next"  # the candidates chart's title
TEXT_IS = "(written) => (document.querySelector('.class-text b')?.textContent || '') {} written"


def generated_text(page) -> str:
    bold = page.locator(".class-text b")
    return bold.last.text_content() if bold.count() else ""


def test_a_step_in_one_process_reaches_a_student_of_the_other_and_a_guess_comes_back(tmp_path):
    from playwright.sync_api import sync_playwright

    env = {"INFERENCE_LAB_CLASS_DB": str(tmp_path / "classes.sqlite3")}
    with streamlit_server(env) as teacher_url, streamlit_server(env) as student_url, sync_playwright() as p:
        browser = launch(p)
        teacher = browser.new_page(viewport={"width": 1280, "height": 900})
        student = browser.new_page(viewport={"width": 800, "height": 1000})
        errors = []
        for page in (teacher, student):
            page.on("pageerror", lambda err: errors.append(str(err)))

        open_page(teacher, f"{teacher_url}/class")
        teacher.get_by_role("button", name="Start a class").click()
        teacher.get_by_text("Class code:").wait_for(timeout=120_000)
        wait_idle(teacher)
        code = teacher.locator("h3 code").first.text_content().strip()
        assert len(code) == 8

        open_page(student, f"{student_url}/class?class={code}")
        student.get_by_text(CANDIDATES).first.wait_for(timeout=60_000)

        follow_ms = []
        for _ in range(2):
            before = generated_text(student)
            teacher.get_by_role("button", name="Draw and reveal").click()
            teacher.wait_for_function(TEXT_IS.format("!=="), arg=before, timeout=60_000)
            written = generated_text(teacher)
            with Stopwatch() as follow:  # from the token on the teacher's screen to the same on the student's
                student.wait_for_function(TEXT_IS.format("==="), arg=written, timeout=30_000)
            follow_ms.append(follow.ms)
        print(f"\na Step reached the student in {max(follow_ms):.0f} ms at most (the issue's bound: 2000 ms)")

        # a guess round across the two processes; the projected teacher screen shows no candidates meanwhile
        teacher.get_by_role("button", name="Open guessing").click()
        wait_idle(teacher)
        main = teacher.locator('[data-testid="stMain"]')
        assert main.get_by_text(CANDIDATES).count() == 0 and main.locator('[data-testid="stPlotlyChart"]').count() == 0
        student.get_by_text("What will the model write next?").wait_for(timeout=10_000)
        student.get_by_role("button", name="Send my guess").click()
        teacher.get_by_text("1 of 1 students have answered").wait_for(timeout=10_000)
        teacher.get_by_role("button", name="Draw and reveal").click()
        wait_idle(teacher)
        student.get_by_text("the draw (u = ").first.wait_for(timeout=10_000)
        teacher.get_by_text("the draw (u = ").first.wait_for(timeout=10_000)
        assert main.get_by_text("The class's guesses").count() >= 1
        keep_screenshot(teacher, "class_teacher_1280")
        keep_screenshot(student, "class_student_800")

        assert teacher.locator('[data-testid="stException"]').count() == 0
        assert student.locator('[data-testid="stException"]').count() == 0
        assert not errors
        browser.close()
