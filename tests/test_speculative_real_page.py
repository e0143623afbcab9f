"""The Speculative page on SmolLM2-135M-Instruct (issue #45, item 6): its feature draft, its own distilled draft, a
self-draft and prompt lookup run greedy and write plain decoding's tokens; the page opens on a story request with the
feature draft, on its first round that drafts; the verify pass is measured on SmolLM2 and on the 6M storyteller side by side."""

import pytest

from inference.core import real_model
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.run import GREEDY
from inference.lessons.speculative import bundled_drafts, feature_draft
from inference.lessons.speculative.comparison import plain_decode
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
NEW = 6


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


@pytest.mark.parametrize("drafter", ["feature", "draft", "self", "lookup"])
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
    if drafter == "draft":  # SmolLM2's own bundled draft, scoring its measured shortlist
        assert run.drafter.model.name_or_path.endswith(bundled_drafts.REAL_DRAFT_NAME)
        assert len(run.drafter.shortlist) == bundled_drafts.default_shortlist(bundled_drafts.REAL_DRAFT_NAME)
    if drafter == "feature":  # one layer reading SmolLM2's last hidden state; its first round is the prefill alone
        assert run.drafter.kind == feature_draft.FEATURE_DRAFT and run.rounds[0].drafted == 0
    story = encode_prompt(on_smollm2.tokenizer, bundled_drafts.STORY_REQUEST, chat=True)  # in the template by default
    assert run.prompt_ids == story
    assert run.generated_ids == plain_decode(on_smollm2.model, run.prompt_ids, len(run.generated_ids), GREEDY)


def test_smollm2_opens_on_a_story_request_with_its_fastest_drafter_on_a_round_that_drafted(on_smollm2):
    """The feature draft (1.32× plain decoding on the story request when shipped, the distilled draft 1.17×); its
    first round is the prefill alone, so the page opens on its second, the first that drafts."""
    at = open_app_page(PAGE, timeout=600)
    assert not at.exception
    assert at.session_state["spec_prompt"] == bundled_drafts.STORY_REQUEST and at.session_state["spec_chat"] is True
    assert at.session_state["spec_drafter"] == "feature" and at.session_state["spec_temperature"] == 0.0
    shipped = {
        name: bundled_drafts.measured_figures(name)["story"]["speedup_vs_plain"]
        for name in (feature_draft.FEATURE_DRAFT_NAME, bundled_drafts.REAL_DRAFT_NAME)
    }
    assert shipped[feature_draft.FEATURE_DRAFT_NAME] > shipped[bundled_drafts.REAL_DRAFT_NAME]  # why it opens
    run = at.session_state["spec_run"]
    assert len(run.rounds) == 2 and run.rounds[0].drafted == 0 and run.rounds[1].drafted > 0
    options = [o for r in at.radio for o in r.options]
    assert "Self-draft (its own first layers)" in options and "Prompt lookup (no model)" in options
    assert "Draft model" in options
    said = " ".join(c.value for c in at.caption)
    assert feature_draft.FEATURE_DRAFT_NAME in said and "EAGLE" in said  # which draft, and what it reads
    assert "on a question it kept" in said  # where its acceptance drops, measured


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
