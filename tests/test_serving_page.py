"""The Serve many page under AppTest: without an engine it says how to get one; with llama-server it replays."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared.serving_controls import VOCAB
from app_pages.shared.shared_results import background_runs
from inference.engines import llamacpp
from inference.lessons.serving import experiments
from tests.conftest import APP_FILE, open_app_page

pytestmark = pytest.mark.engine


def measured(at) -> None:
    """A measurement runs in a background thread: wait for it to end, then draw the page again with its result."""
    background_runs().wait_all(timeout=600)
    at.run()


PAGE = "app_pages/serving.py"


def open_serving_page(**widgets) -> AppTest:
    return open_app_page(PAGE, home_first=True, **widgets)


def charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_without_an_engine_the_page_says_how_to_get_one(monkeypatch):
    """No llama-server build and no INFERENCE_LAB_ENGINES: the build command and the variable, no exception."""
    monkeypatch.setattr(llamacpp, "is_built", lambda: False)
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    at = open_serving_page()
    text = " ".join(w.value for w in at.warning)
    assert "python -m inference.engines llamacpp build" in text and "INFERENCE_LAB_ENGINES" in text


def test_one_engine_is_named_not_offered(monkeypatch):
    """With llama-server built and no engine configured there is nothing to choose: no radio of one option (its
    note names the engine), and the model on it is still a choice."""
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    at = open_serving_page()
    assert not at.exception
    assert [r.label for r in at.main.radio] == ["Model on the engine"]
    assert any("starts `llama-server` on 127.0.0.1" in c.value for c in at.caption)


def test_the_traffic_caption_says_what_the_prompts_are_for_the_model_chosen(monkeypatch):
    """SmolLM2 on the engine is sent real questions (their lengths their texts'); the bundled model random ids."""
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    at = open_serving_page()
    models = experiments.model_options(VOCAB)
    assert experiments.BUNDLED in models and len(at.main.radio[0].options) == len(models)
    for model in models:
        at.main.radio[0].set_value(model).run()
        traffic = next(c.value for c in at.caption if "Poisson process" in c.value)
        real = model == experiments.REAL
        assert ("Prompts are real" in traffic) == real and ("random token ids" in traffic) == (not real), model


def test_presenter_mode_folds_the_engine_and_traffic_and_names_them(monkeypatch):
    """On a projector the model choice and the four traffic settings took the first screen before the traffic
    chart: folded, one line names each, and a folded value still shapes the trace."""
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.session_state["serving_requests"] = 8
    at.session_state["serving_model"] = experiments.BUNDLED
    at.run()
    at.switch_page("app_pages/serving.py").run()
    assert not at.exception
    assert not at.main.radio and not [w for w in at.slider if w.key == "serving_requests"]  # folded away
    line = next(c.value for c in at.caption if c.value.startswith("Now:"))
    assert line == "Now: bundled (trained, 23 MB) · 8 short chat requests arriving at 16/s · seed 0"
    assert charts(at)[0]["layout"]["title"]["text"].startswith("8 requests, short chat")  # the folded count drawn


@pytest.mark.skipif(
    not llamacpp.is_built(), reason="llama-server is not built: python -m inference.engines llamacpp build"
)
def test_replay_on_the_bundled_model_draws_every_request_and_the_comparison():
    """Traffic shown before running; after the click: the 1-vs-N comparison, a Gantt row per request for each
    server, the engine's state, the verdict quoting the chart's asked rate; the capacity button then prices a
    million tokens for each slot count."""
    at = open_serving_page(serving_requests=4, serving_rate=16.0, serving_slots=2)
    traffic = charts(at)[0]
    assert traffic["data"][0]["name"] == "prompt tokens"
    at.button(key="serving_compare").click().run()
    measured(at)
    assert not at.exception
    titles = [c["layout"].get("title", {}).get("text", "") for c in charts(at)]
    assert "Each request<br>1 slot (one at a time)" in titles and "Each request<br>2 slots (batched)" in titles
    assert "Inside the engine<br>2 slots (batched)" in titles
    by_title = {c["layout"].get("title", {}).get("text"): c for c in charts(at)}
    gantt = by_title["Each request<br>2 slots (batched)"]
    assert len(gantt["data"][2]["y"]) == 4  # four decode bars, one per request
    verdict = next(m.value for m in at.markdown if m.value.startswith("With 2 slots"))
    assert "last-level cache" in verdict or "from memory" in verdict  # the why, for this model on this machine
    asked = traffic["layout"]["title"]["text"].split("asking for ")[1].split(" reply tokens/s")[0]
    assert f"asks for {asked} tokens/s" in verdict  # one definition of what the trace asked, in both places
    assert not [m for m in at.metric if "per million tokens" in m.label]  # priced at capacity, not from the replay
    at.button(key="serving_capacity").click().run()
    measured(at)
    assert not at.exception
    assert [m.label for m in at.metric if "per million tokens" in m.label] == [
        "1 slot: per million tokens",
        "2 slots: per million tokens",
    ]
    assert any("Priced at capacity" in c.value for c in at.caption)
