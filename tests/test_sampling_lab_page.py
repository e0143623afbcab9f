"""The Sampling lab through Streamlit's AppTest: it opens with every classic filter acting (each pipeline panel
differs from the one before it), it keeps what depends only on the step while a slider moves (a kept chart never
shows another step), and the sentence under the 1,000 draws names the most likely token's share, never "other"."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from inference.lessons.sampling_lab.figures import draw_band
from inference.lessons.sampling_lab.text import TEXT, top_draw
from tests.conftest import open_app_page, plotly_array

pytestmark = pytest.mark.page

# the 6M storyteller's speed and token ids (SmolLM2's default: tests/test_default_model_page.py)
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

PAGE = "app_pages/sampling.py"


def open_lab() -> AppTest:
    return open_app_page(PAGE)


def chart(at, key: str) -> dict:
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith(key) or key in element.proto.id:
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key}")


def test_the_lab_opens_with_each_pipeline_stage_changing_the_distribution():
    """Every panel of the stage-by-stage chart differs from the one before it: no filter opens switched off."""
    at = open_lab()
    panels = [plotly_array(trace["x"]).astype(float) for trace in chart(at, "lab_pipeline")["data"]]
    assert len(panels) == 6  # raw, then penalty, temperature, top-k, top-p, min-p
    for stage, (before, after) in enumerate(zip(panels, panels[1:]), start=1):
        assert not np.allclose(before, after), f"panel {stage + 1} shows the same bars as panel {stage}"


def test_draws_caption_never_takes_the_other_bucket_for_the_top_token():
    """The issue's case: "other" holds 38%, the top token 26.8%; the sentence gives 26.8% and its band."""
    counts = pd.DataFrame(
        {
            "rank": [1, 2, None],
            "token_id": [5, 9, None],
            "computed": [0.268, 0.352, 0.38],
            "observed": [0.27, 0.35, 0.38],
            "count": [270, 350, 380],
            "token": [" excited", " sad", "other"],
        }
    )
    text = TEXT["draws"].format(**top_draw(counts, 1000, draw_band))
    assert "excited" in text and "26.8%" in text
    assert f"±{100 * float(draw_band(0.268, 1000)):.1f} points" in text
    assert "38" not in text and "other" not in text


def test_a_slider_rerun_reuses_the_temperature_frames_and_another_prompt_makes_new_ones():
    at = open_lab()
    frames = at.session_state["lab_temperature_frames"][1]
    side = at.session_state["lab_side_by_side"][1]

    at.slider(key="lab_top_p").set_value(0.5).run()  # another setting, the same step
    assert at.session_state["lab_temperature_frames"][1] is frames
    assert at.session_state["lab_side_by_side"][1] is side

    at.slider(key="lab_temperature").set_value(1.5).run()  # the chart opens on the new value from the same frames
    assert at.session_state["lab_temperature_frames"][1] is frames
    spec = chart(at, "lab_live_temperature")
    assert spec["layout"]["sliders"][0]["steps"][spec["layout"]["sliders"][0]["active"]]["label"] == "1.5"

    before = chart(at, "lab_live_temperature")["frames"][20]["data"][0]["y"]
    at.text_input(key="lab_prompt").set_value("The dog ran to the").run()
    assert not at.exception
    assert at.session_state["lab_temperature_frames"][1] is not frames
    assert chart(at, "lab_live_temperature")["frames"][20]["data"][0]["y"] != before  # the new step's own tokens
