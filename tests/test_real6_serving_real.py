"""Serve many replays real questions on SmolLM2-135M-Instruct's GGUF (issue #45 item 4): the page's replay draws
the Gantt with each reply in its hover, and the closed table lists what each request asked and got."""

import json

import pytest

from app_pages.shared.shared_results import background_runs
from inference.core import real_model
from inference.engines import llamacpp
from inference.lessons.serving import real_text
from tests.conftest import open_app_page

pytestmark = pytest.mark.engine


@pytest.mark.skipif(
    not llamacpp.is_built(), reason="llama-server is not built: python -m inference.engines llamacpp build"
)
@pytest.mark.skipif(not real_model.is_available(), reason="SmolLM2-135M-Instruct's wheel is not installed")
def test_a_replay_on_smollm2_shows_the_questions_and_their_answers():
    at = open_app_page(
        "app_pages/serving.py",
        home_first=True,
        serving_model=real_model.REAL_MODEL_NAME,
        serving_requests=4,
        serving_rate=16.0,
        serving_slots=2,
    )
    assert not at.exception
    at.button(key="serving_compare").click().run()
    background_runs().wait_all(timeout=600)
    at.run()
    assert not at.exception
    texts = next(frame.value for frame in at.dataframe if "asked" in frame.value.columns)
    assert list(texts["asked"]) == list(real_text.QUESTIONS[:4])
    assert texts["reply"].str.len().min() > 0
    gantts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    batched = next(g for g in gantts if g["layout"].get("title", {}).get("text") == "Each request<br>2 slots (batched)")
    assert all(row[3].startswith("“") for row in batched["data"][2]["customdata"])
