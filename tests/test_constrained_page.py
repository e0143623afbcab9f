"""The Constrained decoding page in Streamlit's AppTest: Step and Play under a format, the run's charts, the
cost, and bad input (an invalid schema or regex, a format no token can produce, too few tokens) as one
sentence with the run so far kept."""

import json
import os

import pytest
from streamlit.testing.v1 import AppTest

from inference.core.tokens import markdown_token_text
from inference.lessons.constrained.text import TEXT
from tests.conftest import APP_FILE, open_app_page

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

PAGE = "app_pages/constrained.py"


def open_page() -> AppTest:
    return open_app_page(PAGE, timeout=300)


def chart_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def click(at, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def test_the_page_opens_on_its_first_step_and_step_takes_the_next():
    """A session's first run opens with its first step taken (the allowed set, its mass and the draw on the first
    screen, Zₜ explained beside them); Step takes the second; Reset starts an empty run."""
    at = open_page()
    assert not at.exception
    run = at.session_state["con_run"]
    assert len(run.records) == 1 and run.records[0].token_text == "{"
    labels = {m.label: m.value for m in at.metric}
    assert labels["Allowed tokens"] == "1 of 4,096"
    assert "The model's favourites and the allowed ones" in chart_titles(at)
    assert any(m.value == TEXT["zt_note"] for m in at.markdown)
    assert len(click(at, "con_step").session_state["con_run"].records) == 2
    assert len(click(at, "con_reset").session_state["con_run"].records) == 0


def test_presenter_mode_folds_the_format_and_settings_and_names_them():
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"] = True
    at.session_state["con_t"] = 0.5
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert not [w for w in at.slider if w.key == "con_t"] and not at.text_area  # folded away
    line = next(c.value for c in at.caption if c.value.startswith("Now:"))
    assert line.startswith("Now: JSON: a name and an age · temperature 0.5 · the mask first · seed 0")
    assert line.endswith("Prompt: " + markdown_token_text(at.session_state["con_prompt"]))  # shown literally
    assert at.session_state["con_run"].records[0].settings.temperature == 0.5  # the folded value drew the step


def test_play_runs_the_json_preset_to_a_valid_object_with_cost_and_the_unconstrained_twin():
    at = click(open_page(), "con_play")
    run = at.session_state["con_run"]
    assert run.trace.finished and run.complete and run.format.matches(run.text)
    titles = " | ".join(chart_titles(at))
    for expected in ("How hard the format fights", "Time per step", "Two ways to apply the format"):
        assert expected in titles, titles
    markdown = " ".join(m.value for m in at.markdown)
    assert "The mask pushed storyteller-llama-6m away" in markdown and "Sample first, then check" in markdown
    assert at.code[0].value == run.text and at.code[1].value == at.session_state["con_twin"].text


def test_bad_input_is_one_sentence_and_the_run_so_far_stays():
    """An invalid schema or regex, a format no token can produce, too few tokens: a warning each, never an error."""
    at = click(open_page(), "con_step")  # the run opened with its first step: two now
    at.text_area(key="con_spec").set_value('{"type": "object",').run()
    assert [w.value for w in at.warning] == [
        "The schema is not valid JSON: Expecting property name enclosed in double quotes at line 1, column 19."
    ]
    assert not at.exception and len(at.session_state["con_run"].records) == 2  # the last run is still shown
    at.selectbox(key="con_preset").set_value("Your own regex").run()
    at.text_area(key="con_spec").set_value("[a-").run()
    assert [w.value for w in at.warning] == ["The regex cannot be used: unclosed character class."]
    at.text_area(key="con_spec").set_value(r"[^\s\S]").run()
    at = click(at, "con_play")
    assert any("No token of this tokenizer can continue the format" in w.value for w in at.warning)
    assert at.session_state["con_run"].records == []
    at.selectbox(key="con_preset").set_value("JSON: a name and an age").run()
    at.number_input(key="con_max").set_value(3).run()
    at = click(at, "con_play")
    assert len(at.session_state["con_run"].records) == 3
    assert any(w.value.startswith("The format needs more tokens than the 3 allowed") for w in at.warning)


def test_token_text_is_escaped_in_the_chips():
    at = open_page()
    at.selectbox(key="con_preset").set_value("Your own choices (one per line)").run()
    at.text_area(key="con_spec").set_value("<b>bold</b>").run()
    at = click(at, "con_play")
    html = next(m.value for m in at.markdown if "token-box" in m.value)
    assert "<b>" not in html and "&#60;" in html
