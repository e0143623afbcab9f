"""Class mode in real Chromium on two app processes sharing one class file: the teacher's Step in one is
on a student's screen served by the other within 2 s. Screenshots to $INFERENCE_LAB_SHOTS (never the repo)."""

import os
import time

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
FOLLOW_SECONDS = 2.0  # the bound: the fragment polls every second, so one poll plus a redraw


def generated_text(page) -> str:
    bold = page.locator(".class-text b")
    return bold.last.text_content() if bold.count() else ""


def test_a_step_in_one_process_reaches_a_student_of_the_other_within_two_seconds(tmp_path):
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
        student.get_by_text("What the model could write next").first.wait_for(timeout=60_000)

        follow_seconds = []
        for _ in range(3):
            before = generated_text(student)
            teacher.get_by_role("button", name="Draw and reveal").click()
            stepped = time.perf_counter()
            deadline = stepped + 60
            while (written := generated_text(teacher)) == before:
                assert time.perf_counter() < deadline, "the teacher's Step wrote nothing"
                teacher.wait_for_timeout(50)
            stepped = time.perf_counter()  # the token is on the teacher's screen: the follow time starts here
            deadline = stepped + 30
            while generated_text(student) != written:
                assert time.perf_counter() < deadline, f"the student never saw {written!r}"
                student.wait_for_timeout(50)
            follow_seconds.append(time.perf_counter() - stepped)

        # a guess round across the two processes: the student answers, the teacher sees it counted
        teacher.get_by_role("button", name="Open guessing").click()
        wait_idle(teacher)
        student.get_by_text("What will the model write next?").wait_for(timeout=10_000)
        student.get_by_role("button", name="Send my guess").click()
        teacher.get_by_text("1 of 1 students have answered").wait_for(timeout=10_000)
        teacher.get_by_role("button", name="Draw and reveal").click()
        wait_idle(teacher)
        student.get_by_text("the draw (u = ").first.wait_for(timeout=10_000)
        keep_screenshot(teacher, "class_teacher_1280")
        keep_screenshot(student, "class_student_800")

        assert teacher.locator('[data-testid="stException"]').count() == 0
        assert student.locator('[data-testid="stException"]').count() == 0
        assert not errors
        assert max(follow_seconds) <= FOLLOW_SECONDS, follow_seconds
        browser.close()
