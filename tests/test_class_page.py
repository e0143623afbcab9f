"""Class mode under AppTest: a teacher session and a student session share one class file; the student's
guess is counted and shown beside the model's probabilities; a student session has no teacher controls."""

import html
import os

import pytest

from tests.conftest import run_app

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


@pytest.fixture
def class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    from app_pages.shared import models

    models.limits.clear()  # limits are read once per process: read this test's file
    yield
    models.limits.clear()


def open_class_page(query=None):
    """The class page, opened as a link would open it (AppTest starts on Generate, whose URL mirror would
    replace a query string given before the switch)."""
    at = run_app()
    at.switch_page("app_pages/class.py").run()
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    return at


def markdown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(s.value for s in at.success)


def test_teacher_starts_student_guesses_and_everyone_sees_the_reveal(class_db):
    teacher = open_class_page()
    teacher.text_input(key="class_prompt").set_value("Once upon a time, there was a little").run()
    teacher.button(key="class_start").click().run()
    assert not teacher.exception
    code_line = next(m.value for m in teacher.markdown if m.value.startswith("### Class code:"))
    code = code_line.split("`")[1]
    teacher.button(key="class_open").click().run()

    student = open_class_page({"class": code})
    assert not student.exception
    assert not {b.key for b in student.button} & {"class_step", "class_open", "class_again", "class_back", "class_end"}
    radio = student.radio(key="class_guess")
    offered = list(radio.options)
    assert len(offered) == 11 and offered[-1] == "something else"  # the top 10, shuffled, and "else"
    chosen_label = radio.value
    submit = next(b for b in student.button if b.label == "Send my guess")
    submit.click().run()
    assert not student.exception

    teacher.run()
    assert any("1 of 1 students have answered" in i.value for i in teacher.info)
    teacher.button(key="class_step").click().run()
    assert not teacher.exception
    sentence = html.unescape(teacher.success[0].value)  # the page shows it through markdown_token_text
    assert sentence.startswith("1 of 1 picked") or "something outside" in sentence
    assert "the draw (u = " in sentence

    student.run()
    assert not student.exception and chosen_label
    assert any("the draw (u = " in html.unescape(s.value) for s in student.success)


def test_unknown_code_is_one_sentence(class_db):
    at = open_class_page({"class": "NOPE2345"})
    assert any("There is no class with the code NOPE2345" in e.value for e in at.error)
