"""The Speculative decoding page under AppTest: on the 6M storyteller (the default model here), and on SmolLM2 with
each of its drafters."""

import json
import os

import pytest

from inference.core import real_model
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.run import GREEDY
from inference.lessons.speculative import comparison, drafters, drafting, feature_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
# Written for the 6M storyteller's speed and token ids (a new session opens on SmolLM2-135M-Instruct otherwise).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def open_page(query: dict | None = None, timeout=300, **widgets):
    at = open_app_page(PAGE, query, timeout=timeout, **widgets)
    assert not at.exception
    return at


def press(at, key: str):
    at.button(key=key).click().run()
    assert not at.exception
    return at


def plain_text(run) -> list[int]:
    return plain_decode(run.target, run.prompt_ids, len(run.generated_ids), GREEDY)


def chart_titles(at) -> str:
    return " | ".join(json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")).lower()


def test_a_sampled_run_opens_on_a_round_and_steps_to_a_rejection_with_every_chart_and_its_own_numbers():
    at = open_page({"t": "1.0", "seed": "3", "g": "6"})
    run = at.session_state["spec_run"]
    assert len(run.rounds) == 1
    while run.rounds[-1].token_kind != "residual" and len(run.rounds) < 7:
        run = press(at, "spec_step").session_state["spec_run"]
    assert run.rounds[-1].token_kind == "residual" and at.query_params["n"] in (
        f"{len(run.rounds)}",
        [f"{len(run.rounds)}"],
    )
    for title in ("q (draft) vs p (target)", "u ≤ p/q", "after the rejection", "where the time went", "against α"):
        assert title in chart_titles(at)
    verify = at.session_state["spec_comparison"][2].verify_cost  # the page's own measurement, quoted as it is
    assert f"**{verify:.2f}** one-token passes" in " ".join(m.value for m in at.markdown)
    assert len(press(at, "spec_reset").session_state["spec_run"].rounds) == 0


def test_greedy_play_writes_plain_greedy_text_and_a_new_gamma_keeps_the_run():
    at = press(open_page({"t": "0", "g": "2", "max": "21", "prompt": "Tom and his dog went to the park."}), "spec_step")
    before = at.session_state["spec_run"]
    at.slider(key="spec_gamma").set_value(4).run()
    run = press(at, "spec_play").session_state["spec_run"]
    assert run is before and run.finished and [r.gamma for r in run.rounds[:3]] == [2, 2, 4]
    assert len(run.generated_ids) == 21 and run.generated_ids == plain_text(run)
    assert run.rounds[at.slider(key=f"spec_round_{len(run.rounds)}").value].drafted > 0  # the last that drafted


def test_a_links_values_are_clamped_with_a_message_and_a_shortlist_it_names_is_scored_in_presenter_mode():
    at = open_page({"g": "40", "max": "100000", "sl": "7"})
    warnings = " ".join(w.value for w in at.warning)
    assert "g=40" in warnings and "max=100000" in warnings and "sl=7" in warnings
    assert at.slider(key="spec_gamma").value == drafters.GAMMA_MAX and at.number_input(key="spec_max_new").value <= 300
    assert at.selectbox(key="spec_shortlist").value == drafters.DEFAULT_SHORTLIST
    at = open_page({"sl": "256", "t": "0", "max": "12"})
    at.toggle(key="presenter").set_value(True).run()
    press(at, "spec_step")
    assert len(at.session_state["spec_run"].drafter.shortlist) == 256 and at.query_params["sl"] in ("256", ["256"])
    assert len(at.table[0].value) == 6  # the six metrics as a table


def test_prompt_lookup_without_repeats_drafts_nothing_and_a_refused_draft_falls_back_to_it(monkeypatch):
    at = press(open_page({"d": "lookup", "prompt": "Blue frogs sing.", "t": "0"}), "spec_step")
    assert any("drafted nothing" in i.value for i in at.info) and len(at.session_state["spec_run"].generated_ids) == 2

    def refuse(*_):
        raise spec.SpeculationError(f"Refused before any forward pass: {spec.TOKENIZER_MISMATCH} (test).")

    monkeypatch.setattr(spec, "check_pair", refuse)
    at = press(open_page(), "spec_step")
    assert any(spec.TOKENIZER_MISMATCH in w.value for w in at.warning)
    assert at.session_state["spec_run"].drafter.kind == drafters.PROMPT_LOOKUP


def test_the_sweep_measures_both_bundled_targets(monkeypatch):
    monkeypatch.setattr(comparison, "SWEEP_GAMMAS", (1, 2))
    monkeypatch.setattr(comparison, "SWEEP_TEMPERATURES", (0.0, 1.2))
    at = press(
        open_page({"t": "0", "max": "12", "prompt": "The cat sat on the mat. The cat sat on the"}), "spec_sweep_button"
    )
    titles = chart_titles(at)
    assert titles.count("speed-up, by γ") == 2 and titles.count("tokens per target pass, by γ") == 2
    assert "verify pass cost, by γ" in titles


# -- on SmolLM2-135M-Instruct -------------------------------------------------------------------------------------


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


@pytest.mark.parametrize("drafter", ["draft", "self", "lookup"])
def test_greedy_play_on_smollm2_writes_plain_tokens(on_smollm2, drafter):
    at = press(open_page({"t": "0", "max": "6", "d": drafter}, timeout=600, spec_self_layers=4), "spec_play")
    run = at.session_state["spec_run"]
    if drafter == "self":  # the page's default scores the tokenizer's first ids
        assert run.drafter.model.config.num_hidden_layers == 4 and run.drafter.shortlist is not None
    if drafter == "draft":  # SmolLM2's own bundled draft, scoring its measured shortlist
        assert run.drafter.model.name_or_path.endswith(drafting.REAL_DRAFT_NAME)
        assert len(run.drafter.shortlist) == drafting.default_shortlist(drafting.REAL_DRAFT_NAME)
    assert run.prompt_ids == encode_prompt(on_smollm2.tokenizer, drafting.STORY_REQUEST, chat=True)
    assert run.generated_ids == plain_text(run)


def test_smollm2_opens_on_a_story_request_with_the_feature_draft_on_a_round_that_drafted(on_smollm2):
    """The feature draft ran fastest when shipped; its first round is the prefill alone, so the page opens on its
    second; Play writes SmolLM2's greedy tokens."""
    at = open_page(timeout=600)
    state = at.session_state
    assert (state["spec_prompt"], state["spec_chat"], state["spec_drafter"], state["spec_temperature"]) == (
        drafting.STORY_REQUEST, True, "feature", 0.0)  # fmt: skip
    run = state["spec_run"]
    assert run.drafter.kind == drafters.FEATURE_DRAFT and [r.drafted > 0 for r in run.rounds] == [False, True]
    assert feature_draft.FEATURE_DRAFT_NAME in " ".join(c.value for c in at.caption)  # what the draft is, measured
    at.number_input(key="spec_max_new").set_value(8).run()
    run = press(at, "spec_play").session_state["spec_run"]
    assert run.generated_ids == plain_text(run)


def test_the_verify_cost_on_both_models(on_smollm2):
    at = press(open_page({"max": "2", "d": "lookup", "t": "0"}, timeout=600), "spec_verify_button")
    labels = " ".join(m.label for m in at.metric)
    assert real_model.REAL_MODEL_NAME in labels and BUNDLED_MODEL_NAME in labels
