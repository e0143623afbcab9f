"""The "More samplers" expander runs its widgets only while open (a Step costs less), and its settings still act
on the draw while it is closed; a link carrying one of them opens it."""

import os

import pytest

from tests.conftest import run_app as app

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


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
