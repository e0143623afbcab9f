"""Serve many and Inside the engine under AppTest without an engine: each says how to get one; with llama-server
built (no button pressed) Serve many names its one engine instead of offering it, presenter mode folds its settings,
and Inside the engine opens on the plan of its first requests, computed exactly before any server starts."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from inference.engines import llamacpp
from inference.lessons.engine_internals import prefix_cache, served
from inference.lessons.serving import models
from tests.conftest import APP_FILE, open_app_page

pytestmark = pytest.mark.page


@pytest.fixture
def no_configured_engine(monkeypatch):
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)


@pytest.mark.parametrize("page", ["app_pages/serving.py", "app_pages/engine-internals.py"])
def test_without_an_engine_the_page_says_how_to_build_one(monkeypatch, no_configured_engine, page):
    monkeypatch.setattr(llamacpp, "is_built", lambda: False)
    at = open_app_page(page, home_first=True)
    assert "python -m inference.engines llamacpp build" in " ".join(w.value for w in at.warning)


def test_one_engine_is_named_not_offered_and_the_model_is_a_choice(monkeypatch, no_configured_engine):
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    at = open_app_page("app_pages/serving.py", home_first=True)
    assert [r.label for r in at.main.radio] == ["Model on the engine"]
    assert len(at.main.radio[0].options) == len(models.model_options(4096))


def test_presenter_mode_folds_the_engine_and_traffic_and_a_folded_value_still_shapes_the_trace(
    monkeypatch, no_configured_engine
):
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.session_state["serving_requests"] = 8
    at.session_state["serving_model"] = models.BUNDLED
    at.run()
    at.switch_page("app_pages/serving.py").run()
    assert not at.exception
    assert not at.main.radio and not [w for w in at.slider if w.key == "serving_requests"]  # folded away
    assert any(c.value.startswith("Now: bundled") for c in at.caption)
    traffic = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert traffic["layout"]["title"]["text"].startswith("8 requests, short chat")


def test_inside_the_engine_opens_on_the_plan_of_its_first_requests(monkeypatch):
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    at = open_app_page(
        "app_pages/engine-internals.py",
        home_first=True,
        internals_model=served.BUNDLED,
        internals_prefix=128,
        internals_suffix=8,
        internals_requests=2,
    )
    model = served.engine_model(served.BUNDLED)
    plan = prefix_cache.request_plan(model.arithmetic, model.context, 128, 8, 2)
    said = [m.value for m in at.markdown if not m.value.startswith("<style")]
    first = said[0]  # above the page's introduction
    assert f"{plan.kv_bytes / 2**20:,.1f} MiB" in first and f"{plan.warm_flops / 1e9:,.2f} GFLOP" in first
