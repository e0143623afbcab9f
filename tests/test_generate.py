"""Generate: the session memo behind its table and chips, a link's step schedule, presenter mode's line of the
knobs acting, and the cumulative chart's labels."""

import os
from dataclasses import dataclass

import pytest
from streamlit.testing.v1 import AppTest

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.lessons.generate.current_step import current_step_view
from inference.lessons.generate.links import LinkError, schedule_param, step_plan
from inference.lessons.generate.text import knobs_now
from inference.sampling.pipeline import LLAMA_CPP_ORDER, TRANSFORMERS_ORDER, SamplingSettings

pytestmark = pytest.mark.unit

# the 6M storyteller's speed and token ids (SmolLM2's default: tests/test_default_model_page.py)
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


MEMO_SCRIPT = """
import streamlit as st
from types import SimpleNamespace
from app_pages.shared.session_memo import kept_per_record, kept_until_changed

run = st.session_state.setdefault("run", SimpleNamespace(records=[object(), object()]))
made = st.session_state.setdefault("made", [])
if st.session_state.get("action") == "back":
    run.records = run.records[:-1]
elif st.session_state.get("action") == "replace":
    run.records = run.records[:-1] + [object()]
elif st.session_state.get("action") == "new_run":
    run = st.session_state["run"] = SimpleNamespace(records=list(run.records))

def make(record):
    made.append(record)
    return id(record)

st.session_state["items"] = kept_per_record("memo", run, make)
st.session_state["built"] = kept_until_changed("until", st.session_state.get("key", 1), lambda: len(made))
"""


def test_kept_per_record_makes_each_record_once_and_kept_until_changed_waits_for_its_key():
    at = AppTest.from_string(MEMO_SCRIPT).run()
    assert len(at.session_state["made"]) == 2
    at.run()  # a rerun with the same records makes nothing
    assert len(at.session_state["made"]) == 2
    at.session_state["action"] = "replace"  # Back then Step: the last record is a new object
    at.run()
    assert len(at.session_state["made"]) == 3
    assert at.session_state["items"] == [id(r) for r in at.session_state["run"].records]
    at.session_state["action"] = "back"
    at.run()
    assert len(at.session_state["made"]) == 3 and len(at.session_state["items"]) == 1
    at.session_state["action"] = "new_run"  # another run with the same record objects starts over
    at.run()
    assert len(at.session_state["made"]) == 4 and at.session_state["built"] == 2  # same key: kept, though made grew
    at.session_state["key"] = 2
    at.run()
    assert at.session_state["built"] == len(at.session_state["made"])


@dataclass
class Record:
    index: int
    settings: SamplingSettings
    seed: int


def test_a_run_drawn_with_the_urls_settings_needs_no_schedule():
    now = SamplingSettings(temperature=0.8)
    assert schedule_param([Record(i, now, 3) for i in range(5)], now, 3) is None
    assert step_plan("", 2, now, 3) == [(now, 3), (now, 3)]


def test_every_step_gets_back_the_settings_and_seed_it_was_drawn_with():
    a = SamplingSettings(temperature=0.8, top_p=0.9)
    b = SamplingSettings(temperature=1.4, top_p=0.9, order=("temperature", "top_k", "top_p", "min_p", "penalty"))
    records = [Record(i, a, 1) for i in range(4)] + [Record(i, b, 1) for i in range(4, 7)] + [Record(7, b, 2)]
    param = schedule_param(records, b, 2)
    assert param is not None and len(param) < 200
    assert step_plan(param, 8, b, 2) == [(r.settings, r.seed) for r in records]


def test_a_damaged_schedule_is_one_sentence():
    with pytest.raises(LinkError, match="could not be read"):
        step_plan("not-a-schedule", 3, SamplingSettings(), 0)
    with pytest.raises(LinkError, match="characters long"):
        step_plan("x" * 5000, 3, SamplingSettings(), 0)


def test_knobs_now_names_what_acts_and_only_that_and_an_order_by_its_preset():
    assert knobs_now(SamplingSettings(temperature=0.7, top_p=0.9)) == ["temperature 0.7", "top-p 0.9"]
    assert knobs_now(SamplingSettings(temperature=0.0)) == ["temperature 0 (greedy)"]
    off_tau = knobs_now(SamplingSettings(mirostat_tau=4.0))  # mirostat off: its τ acts on nothing
    assert off_tau == ["temperature 1"]
    on = knobs_now(SamplingSettings(mirostat=True, mirostat_tau=4.0))
    assert on[-1] == "mirostat v2" and any("4" in part for part in on[1:-1])
    assert not [p for p in knobs_now(SamplingSettings(order=TRANSFORMERS_ORDER)) if "order" in p]
    assert knobs_now(SamplingSettings(order=LLAMA_CPP_ORDER))[-1] == "stage order: llama.cpp default"
    custom = (TRANSFORMERS_ORDER[1], TRANSFORMERS_ORDER[0], *TRANSFORMERS_ORDER[2:])
    assert knobs_now(SamplingSettings(order=custom))[-1] == "stage order: " + ", ".join(custom)


def test_a_finished_run_shows_its_last_draw_on_the_curve_it_was_drawn_from(bundled):
    """Sliders moved after the run ended: the chart keeps the settings the draw was made with (its u lands on that
    curve), and the heading and note say what changed."""
    trace = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 2)
    list(trace.run(SamplingSettings(temperature=0.8)))
    view, heading, note = current_step_view(trace, None, SamplingSettings(temperature=2.0))
    assert view.settings.temperature == 0.8 and view.chosen_id == trace.records[-1].token_id
    curve, rank = view.cumulative_final.numpy(), view.chosen_rank
    assert (curve[rank - 1] if rank else 0.0) <= view.u <= curve[rank] + 1e-9
    assert "drawn" in heading and "T = 0.8" in heading and "T = 2" in note
