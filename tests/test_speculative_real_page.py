"""The Speculative page on SmolLM2-135M-Instruct (issue #45, item 6): a self-draft and prompt lookup run greedy and
write plain decoding's tokens; the verify pass is measured on SmolLM2 and on the 6M storyteller side by side."""

import pytest

from inference.core import real_model
from inference.core.loader import encode_prompt
from inference.core.measuring import GREEDY
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.lessons.speculative.comparison import plain_decode
from inference.lessons.speculative.drafting import COPY_PROMPT
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
NEW = 6


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


@pytest.mark.parametrize("drafter", ["self", "lookup"])
def test_greedy_play_on_smollm2_writes_plain_tokens(on_smollm2, drafter):
    query = {"t": "0", "max": str(NEW), "d": drafter}
    at = open_app_page(PAGE, query, timeout=600, spec_self_layers=4)
    at.button(key="spec_play").click().run()
    assert not at.exception
    run = at.session_state["spec_run"]
    assert run.target.config.num_hidden_layers == 30
    if drafter == "self":
        assert run.drafter.model.config.num_hidden_layers == 4
        assert run.drafter.shortlist is not None  # the page's default: the tokenizer's first ids
    assert run.prompt_ids == encode_prompt(on_smollm2.tokenizer, COPY_PROMPT, chat=True)  # the template by default
    assert run.generated_ids == plain_decode(on_smollm2.model, run.prompt_ids, len(run.generated_ids), GREEDY)


def test_smollm2_opens_on_the_copy_request_with_prompt_lookup(on_smollm2):
    at = open_app_page(PAGE, timeout=600)
    assert at.session_state["spec_prompt"] == COPY_PROMPT and at.session_state["spec_chat"] is True
    assert at.session_state["spec_drafter"] == "lookup"
    assert "Self-draft (its own first layers)" in [o for r in at.radio for o in r.options]


def test_verify_cost_on_both_models(on_smollm2):
    at = open_app_page(PAGE, {"max": "2", "d": "lookup", "t": "0"}, timeout=600)
    at.button(key="spec_play").click().run()  # the section follows a run's own verify cost
    at.button(key="spec_verify_button").click().run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert any(label.startswith(real_model.REAL_MODEL_NAME) for label in labels), labels
    assert any(label.startswith(BUNDLED_MODEL_NAME) for label in labels), labels
    said = " ".join(m.value for m in at.markdown)
    assert "one-token passes on" in said and "last-level cache" in said or "does not report" in said
