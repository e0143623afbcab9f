"""/training-vs-inference under AppTest: the first screen (the distribution before and the fingerprint, nothing
pressed), training a per-session copy in two sessions while the shared cached model keeps its fingerprint, Reset, a
new sentence, the measured sections, a sentence too short, and SmolLM2's single measured step."""

import os

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.lessons.training_vs_inference.weights import fingerprint
from inference.training.train import next_token_loss
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
PAGE = "app_pages/training-vs-inference.py"
NEW_SENTENCE = "Once upon a time there was a dog"


def shared_storyteller():
    """The cached model every session shares (the same st.cache_resource the pages read, in this process)."""
    from app_pages.shared.models import bundled_model

    return bundled_model()


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def click(at, key: str):
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_two_sessions_train_their_own_copies_and_the_shared_model_never_changes():
    """Each session trains its own copy; more steps go on the same copy, Reset restores it, and a new sentence starts
    the copy from the trained model again."""
    shared = shared_storyteller()
    start = fingerprint(shared.model)
    first, second = open_app_page(PAGE, tvi_steps=2), open_app_page(PAGE, tvi_steps=1)
    click(first, "tvi_train")
    click(second, "tvi_train")
    copy_a, copy_b = first.session_state["tvi_copy"][1], second.session_state["tvi_copy"][1]
    assert copy_a.model is not copy_b.model and shared.model not in (copy_a.model, copy_b.model)
    assert (copy_a.steps, copy_b.steps) == (2, 1)
    assert len({fingerprint(copy_a.model), fingerprint(copy_b.model), start}) == 3
    assert len(first.get("plotly_chart")) == 4  # before; before and after; every tensor; the loss
    click(first, "tvi_train")  # two more on the same copy
    assert first.session_state["tvi_copy"][1].steps == 4
    click(first, "tvi_reset")
    assert f"`{start[:16]}…` again" in first.success[0].value
    assert fingerprint(first.session_state["tvi_copy"][1].model) == start == fingerprint(shared.model)

    second.text_input(key="tvi_text").input(NEW_SENTENCE).run()
    assert len(second.get("plotly_chart")) == 1  # the earlier sentence's result is not shown for this one
    click(second, "tvi_train")
    copy_b = second.session_state["tvi_copy"][1]
    assert copy_b.steps == 1  # not 2: the copy went back to the trained model before the new sentence
    with torch.no_grad():
        loss = next_token_loss(shared.model, torch.tensor([encode_prompt(shared.tokenizer, NEW_SENTENCE)]))[0]
    assert copy_b.losses[0] == pytest.approx(loss.item(), rel=1e-5)
    assert fingerprint(shared.model) == start


def test_the_first_screen_then_the_measured_sections():
    """Nothing pressed: the distribution and the fingerprint; then both measurements draw their charts, captioned."""
    at = open_app_page(PAGE)
    assert len(at.get("plotly_chart")) == 1  # the distribution before; nothing trained or measured yet
    assert f"`{fingerprint(shared_storyteller().model)[:16]}" in markdown(at)
    assert [e.label.split(":")[0] for e in at.expander] == ["3. What a step costs", "4. Once vs every request"]
    assert "tvi_copy" not in at.session_state
    click(at, "tvi_measure")
    click(at, "tvi_request")
    assert len(at.get("plotly_chart")) == 4  # before; pass vs step; memory; once vs every request
    captions = " ".join(c.value for c in at.caption)
    for kind in ("🧮 Computed exactly.", "📏 Measured.", "📚 Published."):
        assert kind in captions
    at.text_input(key="tvi_text").input("").run()  # a sentence of one token: a warning, not an error
    assert not at.exception and any("at least two tokens" in w.value for w in at.warning)


def test_smollm2_takes_one_measured_step_on_a_copy_it_does_not_keep(smollm2, local_server):
    at = open_app_page(PAGE, model_source="SmolLM2-135M-Instruct")
    assert [n.key for n in at.number_input if n.key == "tvi_steps"] == []  # no k-step control for a 135M model
    click(at, "tvi_train")
    assert "tvi_copy" not in at.session_state
    result = at.session_state["tvi_result"][1]
    assert len(result.step_ms) == 1 and result.losses[1] < result.losses[0]
    assert "One training step of SmolLM2-135M-Instruct" in markdown(at)  # the big-model path, not k steps
