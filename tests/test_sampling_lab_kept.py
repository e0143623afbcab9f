"""The Sampling lab keeps what depends only on the step (the 41 temperature frames, the side-by-side
temperatures) while a slider moves, and makes it again for another step: a kept chart never shows another step."""

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP_FILE

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def temperature_chart(at) -> dict:
    for element in at.get("plotly_chart"):
        if "lab_live_temperature" in element.proto.id:
            return json.loads(element.proto.spec)
    raise AssertionError("no temperature chart")


def test_a_slider_rerun_reuses_the_temperature_frames_and_another_prompt_makes_new_ones():
    at = AppTest.from_file(APP_FILE, default_timeout=600)
    at.switch_page("app_pages/sampling.py").run()
    assert not at.exception
    frames = at.session_state["lab_temperature_frames"][1]
    side = at.session_state["lab_side_by_side"][1]

    at.slider(key="lab_top_p").set_value(0.5).run()  # another setting, the same step
    assert at.session_state["lab_temperature_frames"][1] is frames
    assert at.session_state["lab_side_by_side"][1] is side

    at.slider(key="lab_temperature").set_value(1.5).run()  # the chart opens on the new value from the same frames
    assert at.session_state["lab_temperature_frames"][1] is frames
    spec = temperature_chart(at)
    assert spec["layout"]["sliders"][0]["steps"][spec["layout"]["sliders"][0]["active"]]["label"] == "1.5"

    before = temperature_chart(at)["frames"][20]["data"][0]["y"]
    at.text_input(key="lab_prompt").set_value("The dog ran to the").run()
    assert not at.exception
    assert at.session_state["lab_temperature_frames"][1] is not frames
    assert temperature_chart(at)["frames"][20]["data"][0]["y"] != before  # the new step's own tokens
