"""The /inside page under AppTest: following a Generate run step by step, a layer pick that reruns no model, a step
beyond the run, a serving engine (an unknown architecture's one sentence: tests/test_inside.py)."""

import os

import pytest

from tests.conftest import run_app

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

PAGE = "app_pages/inside.py"


def open_inside(query: dict | None = None, at=None):
    at = at or run_app(query)
    at.switch_page(PAGE).run()
    assert not at.exception
    return at


def test_a_layer_pick_reruns_no_model():
    """Moving the layer slider redraws the heads from the stored pass: the stored result is the same object."""
    at = open_inside()
    (stored,) = at.session_state["inside_results"].values()
    at.slider(key="inside_layer").set_value(4).run()
    assert not at.exception
    assert any("attention weights in layer 4" in c.value for c in at.caption)
    (again,) = at.session_state["inside_results"].values()
    assert again is stored


def test_the_page_follows_the_generate_run_and_its_steps():
    """After three greedy steps, step 2's pass is the one that read the prompt and the first two tokens."""
    at = run_app({"t": "0"})
    for _ in range(3):
        at.button(key="gen_step").click().run()
    trace = at.session_state["gen_trace"]
    at = open_inside(at=at)
    assert at.radio(key="inside_source").value == "My Generate run"
    assert at.slider(key="inside_step").value == 2
    (inside,) = at.session_state["inside_results"].values()
    assert inside.token_ids == trace.all_ids[: len(trace.prompt_ids) + 2]
    assert inside.followed_id == trace.records[2].token_id == int(inside.logits.argmax())  # greedy
    at.slider(key="inside_step").set_value(0).run()
    assert not at.exception
    assert any(r.token_ids == trace.prompt_ids for r in at.session_state["inside_results"].values())


def test_a_step_beyond_the_run_is_clamped_and_said():
    at = run_app({"t": "0"})
    at.button(key="gen_step").click().run()
    at.button(key="gen_step").click().run()
    at.query_params["step"] = "99"  # a link to /inside?step=99 opened in the same session
    at = open_inside(at=at)
    assert at.slider(key="inside_step").value == 1
    assert any("`step=99` is outside steps 0–1" in w.value for w in at.warning)


def test_a_serving_engine_is_told_why_the_page_runs_locally():
    at = run_app()
    at.session_state["engine_url"] = "http://127.0.0.1:9"  # never contacted: the page needs the weights here
    at = open_inside(at=at)
    assert any("hidden states and attention weights" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 4
