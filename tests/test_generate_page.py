"""Generate page through Streamlit's AppTest: controls, stepping, chart data, shared URLs, and the "More samplers"
expander (its widgets run only while open; its settings act on the draw while closed; a link with one opens it)."""

import json
import os

import numpy as np
import pytest

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view
from tests.conftest import plotly_array
from tests.conftest import run_app as app

pytestmark = pytest.mark.page

# the 6M storyteller's speed and token ids (SmolLM2's default: tests/test_default_model_page.py)
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

CONTROLS = {
    "text_area": ["gen_prompt"],
    "slider": ["gen_temperature", "gen_top_p", "gen_top_k", "gen_min_p", "gen_repetition_penalty", "gen_top_n"],
    "number_input": ["gen_seed", "gen_max_new"],
    "button": ["gen_step", "gen_play", "gen_back", "gen_reset"],
}


def trace_of(at):
    return at.session_state["gen_trace"]


def plotly_figure(at, key_fragment):
    for element in at.get("plotly_chart"):
        spec = json.loads(element.proto.spec)
        if key_fragment in element.proto.id or key_fragment in json.dumps(spec.get("layout", {}).get("title", {})):
            return spec
    raise AssertionError(f"no chart {key_fragment}")


decode = plotly_array


def test_every_control_is_there_with_its_label():
    at = app()
    for kind, keys in CONTROLS.items():
        for key in keys:
            assert getattr(at, kind)(key=key) is not None
    assert at.text_area(key="gen_prompt").value == "Once upon a time"
    labels = {at.slider(key=k).label for k in CONTROLS["slider"]}
    assert {"Temperature", "Top-p", "Top-k", "Min-p", "Repetition penalty"} <= labels
    assert {at.button(key=k).label for k in CONTROLS["button"]} == {"Step", "Play", "Back", "Reset"}
    assert [at.number_input(key=k).label for k in CONTROLS["number_input"]] == ["Seed", "Max new tokens"]


def test_step_back_reset_and_fork_change_the_trace():
    at = app()
    for _ in range(4):
        at.button(key="gen_step").click().run()
    assert len(trace_of(at).records) == 4
    first_four = trace_of(at).generated_ids
    at.button(key="gen_back").click().run()
    assert trace_of(at).generated_ids == first_four[:3]
    at.session_state["gen_fork_open"] = True  # the visitor opens the Fork expander
    at.run()
    at.number_input(key="gen_fork_step").set_value(1).run()
    at.slider(key="gen_temperature").set_value(0.0).run()
    at.button(key="gen_fork").click().run()
    assert trace_of(at).generated_ids == first_four[:1]
    at.button(key="gen_step").click().run()
    record = trace_of(at).records[-1]
    assert record.reused_forward and record.settings.temperature == 0 and record.rank == 0
    at.button(key="gen_reset").click().run()
    assert trace_of(at).records == []
    assert not at.exception


def test_chart_data_equal_the_engine_numbers():
    at = app()
    at.slider(key="gen_temperature").set_value(0.7).run()
    at.slider(key="gen_top_p").set_value(0.8).run()
    trace = trace_of(at)
    settings = SamplingSettings(temperature=0.7, top_p=0.8)
    expected = step_view(trace.peek(), settings, trace.seen_now(), u=trace.next_uniform())
    bars = plotly_figure(at, "Next-token")
    final = decode(bars["data"][1]["x"])[::-1]  # bars are drawn bottom-up; 'other' comes last
    raw = decode(bars["data"][0]["x"])[::-1]
    n = len(final) - 1
    np.testing.assert_allclose(final[:n], expected.final[:n].numpy(), atol=1e-12)
    np.testing.assert_allclose(raw[:n], expected.probs["raw"][:n].numpy(), atol=1e-12)
    np.testing.assert_allclose(final[n], 1 - expected.final[:n].sum().item(), atol=1e-9)
    at.button(key="gen_step").click().run()
    assert trace_of(at).records[-1].token_id == expected.chosen_id  # the draw shown is the draw made


def test_a_shared_url_reproduces_the_same_tokens(bundled):
    at = app({"prompt": "The cat sat", "t": "0.9", "p": "0.9", "k": "40", "minp": "0.02", "rep": "1.1", "seed": "77",
              "max": "50", "n": "12"})  # fmt: skip
    tokens = trace_of(at).generated_ids
    settings = SamplingSettings(temperature=0.9, top_p=0.9, top_k=40, min_p=0.02, repetition_penalty=1.1)
    solo = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "The cat sat"), 50, seed=77)
    assert tokens == [r.token_id for r in solo.run(settings, max_steps=12)]
    assert at.query_params["n"] == ["12"] or at.query_params["n"] == "12"


def test_a_link_copied_after_a_mid_run_change_replays_the_same_tokens():
    """Temperature changed at step 10 of 30, then a fork re-chosen with another seed: the copied link opened in
    a fresh session gives the same 30 tokens (it replayed every step with the URL's sliders before)."""
    at = app({"prompt": "Once upon a time", "max": "30", "t": "0.9", "p": "0.95", "seed": "5"})
    for _ in range(10):
        at.button(key="gen_step").click().run()
    at.slider(key="gen_temperature").set_value(1.6).run()
    at.button(key="gen_play").click().run()
    at.number_input(key="gen_seed").set_value(6).run()
    at.session_state["gen_fork_open"] = True  # the visitor opens the Fork expander
    at.run()
    at.number_input(key="gen_fork_step").set_value(20).run()
    at.button(key="gen_fork").click().run()
    at.button(key="gen_play").click().run()
    assert not at.exception
    tokens = trace_of(at).generated_ids
    assert len(tokens) == 30 or trace_of(at).stop_reason
    assert {r.settings.temperature for r in trace_of(at).records} == {0.9, 1.6}
    params = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert "sched" in params
    fresh = app(params)
    assert trace_of(fresh).generated_ids == tokens


def keys_of(at, kind: str) -> set[str]:
    return {widget.key for widget in at.get(kind)}


def test_a_closed_expander_draws_no_widget_and_its_values_still_act_on_the_draw():
    at = app()
    assert "gen_xtc_probability" not in keys_of(at, "slider")  # closed: nothing of it is built
    assert "gen_temperature" in keys_of(at, "slider")

    at.session_state["gen_more_open"] = True  # what the visitor's click on the expander stores
    at.run()
    assert {"gen_xtc_probability", "gen_xtc_threshold", "gen_typical_p"} <= keys_of(at, "slider")
    at.slider(key="gen_xtc_probability").set_value(1.0).run()
    at.slider(key="gen_xtc_threshold").set_value(0.05).run()

    at.session_state["gen_more_open"] = False
    at.run()
    assert "gen_xtc_probability" not in keys_of(at, "slider")
    at.button(key="gen_step").click().run()
    assert not at.exception
    record = at.session_state["gen_trace"].records[0]
    assert record.settings.xtc_probability == 1.0 and record.settings.xtc_threshold == 0.05
    assert at.query_params["xtcp"] == "1"  # the link still says so


def test_a_link_with_a_newer_sampler_opens_the_expander():
    at = app({"xtcp": "0.5"})
    assert at.slider(key="gen_xtc_probability").value == 0.5
