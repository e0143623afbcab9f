"""The Speculative decoding page in Streamlit's AppTest: rounds, charts, URL settings, bad input."""

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from inference.core.loader import load_model
from inference.core.routing import BUNDLED_MOE_DIR
from inference.core.run import new_trace
from inference.lessons.speculative import drafters, shortlist
from inference.lessons.speculative import run as spec
from inference.lessons.speculative import text as spec_text
from inference.lessons.speculative.sweep import weight_bytes
from inference.sampling.pipeline import SamplingSettings
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
# Written for the 6M storyteller's speed and token ids: it is this page's default model here (a new session opens on
# SmolLM2-135M-Instruct otherwise; tests/test_speculative_real_page.py covers the page on it).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def open_page(query: dict | None = None) -> AppTest:
    return open_app_page(PAGE, query, timeout=300)


def chart_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def test_step_runs_one_round_and_shows_its_test_residual_timeline_and_theory():
    """A sampled round: drafts as chips, p vs q, u against p/q, the residual on a rejection, the timeline and theory."""
    at = open_page({"t": "1.0", "seed": "3", "g": "6"})
    for _ in range(6):
        at.button(key="spec_step").click().run()
        assert not at.exception
        run = at.session_state["spec_run"]
        if run.rounds[-1].token_kind == "residual":
            break
    assert run.rounds[-1].token_kind == "residual"
    titles = " | ".join(chart_titles(at))
    for expected in (
        "q (draft) vs p (target)",
        "u ≤ p/q",
        "after the rejection",
        "Where the time went",
        "Speed-up against α",
    ):
        assert expected.lower() in titles.lower(), titles
    assert len(run.rounds) == int(
        at.query_params["n"][0] if isinstance(at.query_params["n"], list) else at.query_params["n"]
    )
    assert any(m.label.startswith("α") for m in at.metric)


def test_greedy_play_writes_plain_greedy_text_and_metrics():
    """Play at temperature 0 makes exactly the tokens plain greedy decoding makes, and reports α and a speed-up."""
    at = open_page({"t": "0", "max": "30", "prompt": "Tom and his dog went to the park."})
    at.button(key="spec_play").click().run()
    assert not at.exception
    run = at.session_state["spec_run"]
    assert run.finished
    trace = new_trace(run.target, run.tokenizer, run.prompt_ids, 30)
    list(trace.run(SamplingSettings(temperature=0)))
    assert run.generated_ids == trace.generated_ids
    labels = [m.label for m in at.metric]
    assert "Measured speed-up" in labels and "Tokens per target pass" in labels


def test_gamma_out_of_range_in_the_url_is_clamped_with_a_message():
    """?g=40 opens with γ = 16 and says why, in one sentence."""
    at = open_page({"g": "40"})
    assert at.slider(key="spec_gamma").value == drafters.GAMMA_MAX
    assert any("g=40" in w.value and "1–16" in w.value for w in at.warning)


def test_max_tokens_above_the_server_limit_is_capped_with_a_message():
    """A link asking for more tokens than the server allows is capped at the limit, and says so."""
    at = open_page({"max": "100000"})
    assert any("max=100000" in w.value for w in at.warning)
    assert at.number_input(key="spec_max_new").value <= 300


def test_prompt_lookup_on_a_prompt_without_repeats_says_it_drafted_nothing():
    """Prompt lookup with nothing to copy: the round drafts nothing, says so, and the run goes on."""
    at = open_page({"d": "lookup", "prompt": "Blue frogs sing.", "t": "0"})
    at.button(key="spec_step").click().run()
    assert not at.exception
    assert any("drafted nothing" in i.value for i in at.info)
    assert len(at.session_state["spec_run"].generated_ids) == 2  # the round on page load (#46 item 11), then Step's


def test_the_sweep_button_measures_once_and_draws_measured_and_predicted_curves(monkeypatch):
    """The sweep runs behind its button (fewer runs here) and its two charts appear with both curves."""
    from inference.lessons.speculative import sweep as speculative_sweep

    monkeypatch.setattr(speculative_sweep, "SWEEP_GAMMAS", (1, 2))
    monkeypatch.setattr(speculative_sweep, "SWEEP_TEMPERATURES", (0.0, 1.2))
    original = speculative_sweep.sweep
    monkeypatch.setattr(
        speculative_sweep, "sweep", lambda *a, **k: original(*a, **{**k, "gammas": (1, 2), "temperatures": (0.0, 1.2)})
    )
    at = open_page({"t": "0", "max": "12", "prompt": "The cat sat on the mat. The cat sat on the"})
    at.button(key="spec_step").click().run()
    at.button(key="spec_sweep_button").click().run()
    assert not at.exception
    titles = chart_titles(at)
    assert any(t.startswith("Speed-up, by γ") for t in titles), titles
    assert any("Tokens per target pass" in t for t in titles)
    assert any("Drafter: draft model" in c.value for c in at.caption)  # the sweep names its drafter
    # both sides (issue #29): the bundled MoE target's sweep under the page's, and the sentence that compares them
    assert sum(t.startswith("Speed-up, by γ") for t in titles) == 2
    assert any(t.startswith("Verify pass cost, by γ") for t in titles)
    moe = load_model(str(BUNDLED_MOE_DIR))
    moe_heading = spec_text.side_heading("storyteller-moe-16m", weight_bytes(moe.model))  # the name escaped
    assert any(m.value == moe_heading for m in at.markdown)
    assert any(m.value.startswith("Both sides, measured just now") for m in at.markdown)


def test_a_tokenizer_mismatch_falls_back_to_prompt_lookup_and_says_why(monkeypatch):
    """A draft with another vocabulary is refused before any forward pass; the page runs prompt lookup."""

    def refuse(*_):
        raise spec.SpeculationError(f"Refused before any forward pass: {spec.TOKENIZER_MISMATCH} (test).")

    monkeypatch.setattr(spec, "check_pair", refuse)
    at = open_page()
    assert any(spec.TOKENIZER_MISMATCH in w.value for w in at.warning)
    at.button(key="spec_step").click().run()
    assert not at.exception
    assert at.session_state["spec_run"].drafter.kind == drafters.PROMPT_LOOKUP


def test_alpha_is_defined_once_on_the_page_and_c_comes_with_how_it_was_measured():
    """Issue #23 item 9: α = accepted ÷ checked, said on the page beside the metric; c with its measurement."""
    at = open_page({"t": "1.0", "seed": "3", "g": "6"})
    at.button(key="spec_step").click().run()
    at.button(key="spec_step").click().run()
    assert not at.exception
    assert any(m.label == "α = accepted ÷ checked" for m in at.metric)
    text = " ".join(m.value for m in at.markdown)
    assert text.count("always means accepted ÷ checked") == 1
    assert "is measured, not a constant" in text and "checked" in text
    run = at.session_state["spec_run"]
    verify = at.session_state["spec_comparison"][2].verify_cost  # the page's own measurement, in one-token passes
    assert f"γ + 1 = {run.gamma + 1} tokens cost **{verify:.2f}** one-token passes" in text  # issue #44 item 6


def test_presenter_mode_shows_the_run_metrics_as_a_table_that_wraps():
    """At 800 px, projector-sized metrics were cut ("89% (8 …"): presenter mode gives them an HTML table."""
    at = open_page({"t": "0", "max": "12"})
    at.toggle(key="presenter").set_value(True).run()
    at.button(key="spec_step").click().run()
    assert not at.exception
    measures = at.table[0].value
    assert "α = accepted ÷ checked" in measures.index and len(measures) == 6


def test_the_draft_scores_its_shortlist_from_the_url_and_a_bad_size_says_so():
    """`sl=256`: the run's draft scores the 256 most frequent tokens (the choice lists its coverage); `sl=7` warns and
    keeps the default; `sl=0` scores every token. The link carries the choice."""
    at = open_page({"sl": "256", "t": "0", "max": "12"})
    at.button(key="spec_step").click().run()
    assert not at.exception
    drafter = at.session_state["spec_run"].drafter
    assert drafter.shortlist is not None and len(drafter.shortlist) == 256
    box = at.selectbox(key="spec_shortlist")
    assert (
        box.value == 256
        and "256 most frequent" in box.format_func(256)
        and "% of its training text" in box.format_func(256)
    )
    assert at.query_params["sl"] in ("256", ["256"])

    at = open_page({"sl": "7"})
    assert any("is not a shortlist size" in w.value for w in at.warning)
    assert at.selectbox(key="spec_shortlist").value == shortlist.DEFAULT_SIZE

    at = open_page({"sl": "0", "t": "0", "max": "12"})
    at.button(key="spec_step").click().run()
    assert at.session_state["spec_run"].drafter.shortlist is None
