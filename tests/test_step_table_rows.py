"""Generate's step table is made row by row, each row once, as its step is made; it must equal the table made from
the whole run's frame, and the session memo must reuse rows only for the very records they came from."""

import os

import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from inference.core.loader import encode_prompt
from inference.core.run import new_trace, record_row
from inference.lessons.generate.figures import step_frame_for_table, step_table_row
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


@pytest.mark.parametrize("settings", [SamplingSettings(temperature=0.8, top_p=0.95), SamplingSettings(temperature=0)])
def test_rows_made_one_by_one_equal_the_whole_frames_table(bundled, settings):
    model, tokenizer = bundled.model, bundled.tokenizer
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, "Once upon a time"), 25, seed=3)
    for _ in range(25):
        trace.step(settings)
    rows = [step_table_row(record_row(r)) for r in trace.records]
    whole = step_frame_for_table(trace.to_frame())
    pd.testing.assert_frame_equal(pd.DataFrame(rows), whole, check_exact=True)
    pd.testing.assert_frame_equal(
        pa.Table.from_pylist(rows).to_pandas(), whole, check_exact=True
    )  # as the page sends it


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


def test_kept_per_record_makes_each_record_once_and_remakes_replaced_ones():
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
    assert len(at.session_state["made"]) == 4


def test_kept_until_changed_rebuilds_only_when_its_key_changes():
    at = AppTest.from_string(MEMO_SCRIPT).run()
    first = at.session_state["built"]
    at.session_state["action"] = "replace"
    at.run()
    assert at.session_state["built"] == first  # same key: kept, though `made` grew
    at.session_state["key"] = 2
    at.run()
    assert at.session_state["built"] == len(at.session_state["made"])
