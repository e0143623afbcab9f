"""The Inside the engine page under AppTest: without a llama-server build it says how to get one; with one, a
prefix-cache run on the bundled model draws its chart and the sentence computed from it."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared.shared_results import background_runs
from inference.engines import llamacpp
from tests.conftest import open_app_page
from tests.test_engines import require_llama_server

pytestmark = pytest.mark.engine


def measured(at) -> None:
    """A measurement runs in a background thread: wait for it to end, then draw the page again with its result."""
    background_runs().wait_all(timeout=600)
    at.run()


PAGE = "app_pages/engine-internals.py"


def open_page(**widgets) -> AppTest:
    return open_app_page(PAGE, home_first=True, **widgets)


def test_without_a_build_the_page_says_how_to_build_llama_server(monkeypatch):
    monkeypatch.setattr(llamacpp, "is_built", lambda: False)
    at = open_page()
    assert "python -m inference.engines llamacpp build" in " ".join(w.value for w in at.warning)


def test_a_prefix_cache_run_draws_the_requests_and_says_what_was_reused():
    require_llama_server()
    at = open_page(internals_prefix=128, internals_suffix=8, internals_requests=2)
    at.button(key="internals_prefix_run").click().run()
    measured(at)
    assert not at.exception
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [trace["name"] for trace in figure["data"]] == ["cache_prompt off", "cache_prompt on"]
    verdict = next(m.value for m in at.markdown if m.value.startswith("With the cache on"))
    assert "evaluated all 136 prompt tokens" in verdict and "reused 128 tokens" in verdict
