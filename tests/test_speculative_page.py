"""The Speculative decoding page under AppTest: on the 6M storyteller (the default model here), and on SmolLM2 with
each of its drafters."""

import json
import os

import pytest

from inference.core import real_model
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.run import GREEDY, new_trace
from inference.lessons.speculative import comparison, drafters, drafting, feature_draft
from inference.lessons.speculative import run as spec
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
# Written for the 6M storyteller's speed and token ids (a new session opens on SmolLM2-135M-Instruct otherwise).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def open_page(query: dict | None = None, **widgets):
    return open_app_page(PAGE, query, timeout=300, **widgets)


def chart_titles(at) -> str:
    return " | ".join(json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart"))


def said(at) -> str:
    return " ".join(m.value for m in at.markdown)


def test_it_opens_on_one_round_and_step_shows_its_test_residual_timeline_theory_and_verdict():
    """A sampled run: a round on page load, Steps to a rejection, its charts, α defined once, c with how it was
    measured, the verify cost the verdict quotes the page's own; Reset empties the run."""
    at = open_page({"t": "1.0", "seed": "3", "g": "6"})
    run = at.session_state["spec_run"]
    assert len(run.rounds) == 1 and any(s.value == "One round, opened up" for s in at.subheader)
    for _ in range(6):
        at.button(key="spec_step").click().run()
        assert not at.exception
        if at.session_state["spec_run"].rounds[-1].token_kind == "residual":
            break
    run = at.session_state["spec_run"]
    assert run.rounds[-1].token_kind == "residual"
    titles = chart_titles(at).lower()
    for title in ("q (draft) vs p (target)", "u ≤ p/q", "after the rejection", "where the time went", "against α"):
        assert title in titles, titles
    assert at.query_params["n"] in (str(len(run.rounds)), [str(len(run.rounds))])
    assert any(m.label == "α = accepted ÷ checked" for m in at.metric)
    text = said(at)
    assert text.count("always means accepted ÷ checked") == 1 and "is measured, not a constant" in text
    verify = at.session_state["spec_comparison"][2].verify_cost  # the page's own measurement, in one-token passes
    assert f"γ + 1 = {run.gamma + 1} tokens cost **{verify:.2f}** one-token passes" in text
    at.button(key="spec_reset").click().run()
    assert len(at.session_state["spec_run"].rounds) == 0


def test_greedy_play_writes_plain_greedy_text_keeps_the_run_on_a_new_gamma_and_opens_a_round_that_drafted():
    at = open_page({"t": "0", "g": "2", "max": "21", "prompt": "Tom and his dog went to the park."})
    at.button(key="spec_step").click().run()
    before = at.session_state["spec_run"]
    at.slider(key="spec_gamma").set_value(4).run()
    assert at.session_state["spec_run"] is before and len(before.rounds) == 2
    at.button(key="spec_play").click().run()
    assert not at.exception
    run = at.session_state["spec_run"]
    assert run.finished and [r.gamma for r in run.rounds[:3]] == [2, 2, 4]
    trace = new_trace(run.target, run.tokenizer, run.prompt_ids, 21)
    list(trace.run(GREEDY))
    assert run.generated_ids == trace.generated_ids
    assert {"Measured speed-up", "Tokens per target pass"} <= {m.label for m in at.metric}
    assert run.rounds[at.slider(key=f"spec_round_{len(run.rounds)}").value].drafted > 0


def test_a_links_values_out_of_range_are_clamped_with_a_message():
    at = open_page({"g": "40", "max": "100000", "sl": "7"})
    warnings = " ".join(w.value for w in at.warning)
    assert "g=40" in warnings and "1–16" in warnings and "max=100000" in warnings and "not a shortlist size" in warnings
    assert at.slider(key="spec_gamma").value == drafters.GAMMA_MAX and at.number_input(key="spec_max_new").value <= 300
    assert at.selectbox(key="spec_shortlist").value == drafters.DEFAULT_SHORTLIST


def test_prompt_lookup_on_a_prompt_without_repeats_says_it_drafted_nothing():
    at = open_page({"d": "lookup", "prompt": "Blue frogs sing.", "t": "0"})
    at.button(key="spec_step").click().run()
    assert not at.exception and any("drafted nothing" in i.value for i in at.info)
    assert len(at.session_state["spec_run"].generated_ids) == 2  # the round on page load, then Step's


def test_the_sweep_measures_both_bundled_targets_and_compares_them(monkeypatch):
    monkeypatch.setattr(comparison, "SWEEP_GAMMAS", (1, 2))
    monkeypatch.setattr(comparison, "SWEEP_TEMPERATURES", (0.0, 1.2))
    at = open_page({"t": "0", "max": "12", "prompt": "The cat sat on the mat. The cat sat on the"})
    at.button(key="spec_sweep_button").click().run()
    assert not at.exception
    titles = chart_titles(at)
    assert titles.count("Speed-up, by γ") == 2 and titles.count("Tokens per target pass, by γ") == 2
    assert "Verify pass cost, by γ" in titles and any("Drafter: draft model" in c.value for c in at.caption)
    assert sum(m.value.startswith("**Target ") for m in at.markdown) == 2  # each side under its own heading
    assert "Both sides, measured just now" in said(at)


def test_a_tokenizer_mismatch_falls_back_to_prompt_lookup_and_says_why(monkeypatch):
    def refuse(*_):
        raise spec.SpeculationError(f"Refused before any forward pass: {spec.TOKENIZER_MISMATCH} (test).")

    monkeypatch.setattr(spec, "check_pair", refuse)
    at = open_page()
    assert any(spec.TOKENIZER_MISMATCH in w.value for w in at.warning)
    at.button(key="spec_step").click().run()
    assert not at.exception and at.session_state["spec_run"].drafter.kind == drafters.PROMPT_LOOKUP


def test_the_draft_scores_the_shortlist_a_link_names_and_presenter_mode_shows_the_metrics_as_a_table():
    at = open_page({"sl": "256", "t": "0", "max": "12"})
    at.toggle(key="presenter").set_value(True).run()
    at.button(key="spec_step").click().run()
    assert not at.exception
    assert len(at.session_state["spec_run"].drafter.shortlist) == 256 and at.query_params["sl"] in ("256", ["256"])
    assert "% of its training text" in at.selectbox(key="spec_shortlist").format_func(256)
    measures = at.table[0].value
    assert "α = accepted ÷ checked" in measures.index and len(measures) == 6


# -- on SmolLM2-135M-Instruct -------------------------------------------------------------------------------------


@pytest.fixture
def on_smollm2(monkeypatch, smollm2, tmp_path):
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", real_model.REAL_MODEL_NAME)
    monkeypatch.setenv("INFERENCE_LAB_CLASS_DB", str(tmp_path / "classes.sqlite3"))
    return smollm2


@pytest.mark.parametrize("drafter", ["feature", "draft", "self", "lookup"])
def test_greedy_play_on_smollm2_writes_plain_tokens(on_smollm2, drafter):
    at = open_app_page(PAGE, {"t": "0", "max": "6", "d": drafter}, timeout=600, spec_self_layers=4)
    at.button(key="spec_play").click().run()
    assert not at.exception
    run = at.session_state["spec_run"]
    if drafter == "self":  # the page's default scores the tokenizer's first ids
        assert run.drafter.model.config.num_hidden_layers == 4 and run.drafter.shortlist is not None
    if drafter == "draft":  # SmolLM2's own bundled draft, scoring its measured shortlist
        assert run.drafter.model.name_or_path.endswith(drafting.REAL_DRAFT_NAME)
        assert len(run.drafter.shortlist) == drafting.default_shortlist(drafting.REAL_DRAFT_NAME)
    if drafter == "feature":  # its first round is the prefill alone
        assert run.drafter.kind == drafters.FEATURE_DRAFT and run.rounds[0].drafted == 0
    assert run.prompt_ids == encode_prompt(on_smollm2.tokenizer, drafting.STORY_REQUEST, chat=True)
    plain = comparison.plain_decode(on_smollm2.model, run.prompt_ids, len(run.generated_ids), GREEDY)
    assert run.generated_ids == plain


def test_smollm2_opens_on_a_story_request_with_the_feature_draft_on_a_round_that_drafted(on_smollm2):
    """The feature draft ran fastest when shipped (its speculation.json against the distilled draft's); its first
    round is the prefill alone, so the page opens on its second."""
    at = open_app_page(PAGE, timeout=600)
    assert not at.exception
    state = at.session_state
    assert state["spec_prompt"] == drafting.STORY_REQUEST and state["spec_chat"] is True
    assert state["spec_drafter"] == "feature" and state["spec_temperature"] == 0.0
    shipped = {
        name: drafting.read_json(name, drafting.MEASURED_FILE)["story"]["speedup_vs_plain"]
        for name in (feature_draft.FEATURE_DRAFT_NAME, drafting.REAL_DRAFT_NAME)
    }
    assert shipped[feature_draft.FEATURE_DRAFT_NAME] > shipped[drafting.REAL_DRAFT_NAME]
    run = state["spec_run"]
    assert len(run.rounds) == 2 and run.rounds[0].drafted == 0 and run.rounds[1].drafted > 0
    assert [o for r in at.radio for o in r.options][:4] == list(drafting.DRAFTERS.values())
    captions = " ".join(c.value for c in at.caption)
    assert feature_draft.FEATURE_DRAFT_NAME in captions and "EAGLE" in captions and "on a question it kept" in captions


def test_the_verify_cost_on_both_models(on_smollm2):
    at = open_app_page(PAGE, {"max": "2", "d": "lookup", "t": "0"}, timeout=600)
    at.button(key="spec_verify_button").click().run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert any(label.startswith(real_model.REAL_MODEL_NAME) for label in labels), labels
    assert any(label.startswith(BUNDLED_MODEL_NAME) for label in labels), labels
    assert "one-token passes on" in said(at)
