"""The default model and each page's opening prompt follow the model (issue #45); every sentence that used to assume
a story model now names the loaded model and its own figures."""

import pytest

from app_pages.shared import models
from inference.core import real_model
from inference.core.bundled import bundled_models
from inference.core.limits import Limits
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.prompting import GENERAL, OPENING_PROMPTS, STORY, model_kind, opening_prompt
from inference.core.tokens import markdown_token_text
from inference.lessons.compare import text as compare_text
from inference.lessons.constrained.formats import GENERAL_PROMPTS, PRESETS, preset_prompt
from inference.lessons.kv_cache import text as kv_text

pytestmark = pytest.mark.unit

SMOL = real_model.REAL_MODEL_NAME


@pytest.fixture
def default_for(monkeypatch):
    """default_source() with INFERENCE_LAB_DEFAULT_MODEL set, the wheel said installed or not."""

    def pick(wanted: str, installed: bool = True):
        monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", wanted)
        monkeypatch.setattr(real_model, "is_available", lambda: installed)
        models._default_for.clear()
        return models.default_source()

    yield pick
    models._default_for.clear()


def test_the_default_limit_is_smollm2_and_read_from_the_environment():
    assert Limits().default_model == SMOL
    assert Limits.from_env({"INFERENCE_LAB_DEFAULT_MODEL": "gpt2"}).default_model == "gpt2"


def test_the_default_is_smollm2_when_its_wheel_is_installed(default_for):
    assert default_for(SMOL) == (SMOL, "")
    assert default_for(SMOL.lower()) == (SMOL, "")  # the loader's name in any case, as the picker spells it


def test_the_default_is_the_storyteller_without_the_wheel_and_says_how_to_install(default_for):
    source, note = default_for(SMOL, installed=False)
    assert source == "" and BUNDLED_MODEL_NAME in note and real_model.INSTALL_HINT in note and SMOL in note


def test_a_server_can_pick_the_storyteller_or_any_model(default_for):
    assert default_for(BUNDLED_MODEL_NAME) == ("", "")
    assert default_for("") == ("", "")
    assert default_for("gpt2") == ("gpt2", "")


def test_models_trained_here_get_story_prompts_and_others_general_ones():
    assert {model_kind(m.name) for m in bundled_models()} == {STORY}
    assert model_kind(SMOL) == model_kind("gpt2") == model_kind("HuggingFaceTB/SmolLM2-135M-Instruct") == GENERAL


def test_every_page_has_a_prompt_for_each_kind_and_the_storyteller_keeps_its_own():
    for page, prompts in OPENING_PROMPTS.items():
        assert set(prompts) == {STORY, GENERAL} and all(p.text.strip() for p in prompts.values()), page
        assert not prompts[STORY].chat, page  # the storyteller has no chat template
    assert opening_prompt("generate", BUNDLED_MODEL_NAME).text == "Once upon a time"
    assert opening_prompt("generate", SMOL).text == "What is the capital of France? Answer in one sentence."
    assert opening_prompt("generate", SMOL).chat and opening_prompt("compare", SMOL).chat
    assert opening_prompt("compare", SMOL).text == "Write a short poem about the sea."
    assert opening_prompt("sampling", SMOL).text == opening_prompt("start", SMOL).text == "The capital of France is"
    general = " ".join(p[GENERAL].text for p in OPENING_PROMPTS.values()).lower()
    assert "once upon" not in general and "lily" not in general


def test_constrained_presets_have_a_prompt_per_kind():
    assert set(GENERAL_PROMPTS) == set(PRESETS)
    for name in PRESETS:
        assert preset_prompt(name, STORY) == PRESETS[name][1]
        assert preset_prompt(name, GENERAL) == GENERAL_PROMPTS[name] and "Lily" not in GENERAL_PROMPTS[name]


def test_many_seeds_intro_names_the_model_and_its_escaped_stop_tokens():
    intro = compare_text.many_seeds_intro(SMOL, ["<|endoftext|>", "<|im_end|>"])
    assert SMOL in intro and "story" not in intro and "<|" not in intro
    assert f"**{markdown_token_text('<|endoftext|>')}** or **{markdown_token_text('<|im_end|>')}**" in intro
    assert "names no stop token" in compare_text.many_seeds_intro("gpt2", [])


def test_many_seeds_button_writes_texts_not_stories():
    line = compare_text.not_yet(100, 48)
    assert (
        line.startswith("Press the button to write 100 texts with A and 100 with B (48 tokens") and "stor" not in line
    )


def test_kv_trend_names_the_model_and_the_measured_saving():
    line = kv_text.trend(SMOL, 80.0, 95.5, 180.25, 210)
    assert f"on {SMOL}" in line and "tiny" not in line
    assert "15.5 ms a step near the start and 100.2 ms near the end" in line and "210 tokens" in line
