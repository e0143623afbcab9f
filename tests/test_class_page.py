"""Class mode under AppTest: a teacher session and a student session share one class file; the student's guess is
counted and shown beside the model's probabilities on both screens; while guessing is open no screen shows the
model's candidates; a student has no teacher controls. (Across app processes: tests/test_class_store.py, and
the two-host hall, tests/test_two_hosts.py.)"""

import html
import os

import pytest

from tests.conftest import run_app

pytestmark = pytest.mark.page

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")  # these pages' model here
CANDIDATES = "What the model could write next"  # the choices chart's title


@pytest.fixture
def class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    from app_pages.shared import models

    models.limits.clear()  # limits are read once per process: read this test's file
    yield
    models.limits.clear()


def open_class_page(query=None):
    """The class page as a link opens it (AppTest starts on Generate, whose URL mirror would replace a query)."""
    at = run_app()
    at.switch_page("app_pages/class.py").run()
    at.query_params.update(query or {})
    at.run()
    assert not at.exception
    return at


def chart_titles(at) -> list[str]:
    return [chart.proto.spec for chart in at.get("plotly_chart")]


def test_teacher_starts_student_guesses_and_everyone_sees_the_reveal(class_db):
    teacher = open_class_page()
    teacher.text_input(key="class_prompt").set_value("Once upon a time, there was a little").run()
    teacher.button(key="class_start").click().run()
    assert not teacher.exception
    code = next(m.value for m in teacher.markdown if m.value.startswith("### Class code:")).split("`")[1]
    assert any(CANDIDATES in spec for spec in chart_titles(teacher))
    teacher.button(key="class_open").click().run()
    assert not chart_titles(teacher), "the projected teacher's screen shows no candidates while guessing is open"

    student = open_class_page({"class": code})
    assert not {b.key for b in student.button} & {"class_step", "class_open", "class_again", "class_back", "class_end"}
    assert not chart_titles(student)
    radio = student.radio(key="class_guess")
    assert len(radio.options) == 11 and radio.options[-1] == "something else"  # the top 10, shuffled, and "else"
    student.slider(key="class_stated").set_value(40)
    next(b for b in student.button if b.label == "Send my guess").click().run()
    assert not student.exception

    teacher.run()
    assert any("1 of 1 students have answered" in i.value for i in teacher.info)
    teacher.button(key="class_step").click().run()
    assert not teacher.exception
    sentence = html.unescape(teacher.success[0].value)
    assert sentence.startswith("1 of 1 picked") or "something outside" in sentence
    assert "the draw (u = " in sentence and any("The class's guesses" in spec for spec in chart_titles(teacher))
    assert any("40% likely on average" in c.value for c in teacher.caption)  # how sure the student said they were
    student.run()
    assert not student.exception and any("the draw (u = " in html.unescape(s.value) for s in student.success)
    teacher.button(key="class_again").click().run()  # the same step with the next seed
    assert not teacher.exception and any("Seed **1**" in m.value for m in teacher.markdown)


def test_unknown_code_is_one_sentence(class_db):
    at = open_class_page({"class": "NOPE2345"})
    assert any("There is no class with the code NOPE2345" in e.value for e in at.error)
