"""The KV cache page under AppTest: the with/without comparison and the loop note with its link."""

import json
import os

import pytest

from tests.conftest import open_app_page

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here.
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def test_the_comparison_runs_and_a_looping_greedy_text_links_to_the_repetition_penalty():
    """The default prompt's 200 greedy tokens, with and without the cache: same tokens, the step and total charts,
    the measured trend, and the loop named with how often it repeats and a link to Generate's repetition penalty."""
    at = open_app_page("app_pages/kv-cache.py", timeout=300, home_first=True)
    at.button(key="kv_compare").click().run()
    assert not at.exception
    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    assert "Time per step" in titles and "Total time so far" in titles and "Memory per model" in titles
    assert any(m.label == "Same tokens?" and m.value == "yes ✓" for m in at.metric)
    assert any("**In this run**" in m.value for m in at.markdown)
    notes = [m.value for m in at.markdown if "The greedy text loops" in m.value]
    assert len(notes) == 1 and " times in these 200 tokens" in notes[0]
    assert len([el for el in at.get("page_link") if "repetition penalty" in el.proto.label]) == 1
