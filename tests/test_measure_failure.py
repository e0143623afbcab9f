"""A measurement that fails is one sentence on the page, never a traceback, and an earlier result stays (#23)."""

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.page


def _page():
    import streamlit as st

    from app_pages.shared.shared_results import measure_on_click, shared_results
    from inference.engines.client import EngineError

    shared_results()["failing-measurement-test"] = "earlier result"

    def measure(progress):
        progress(0, 1, "measuring")
        raise EngineError("Only 7 of 8 requests sent together completed: request 3 failed (it broke off).")

    result = measure_on_click("Measure", "measure_button", "failing-measurement-test", measure, "Not yet.")
    st.write(f"shown: {result}")


def test_a_failing_measurement_is_one_sentence_and_keeps_the_earlier_result():
    app = AppTest.from_function(_page, default_timeout=60).run()
    app.button(key="measure_button").click().run()
    assert not app.exception
    assert [e.value for e in app.error] == [
        "The measurement failed: Only 7 of 8 requests sent together completed: request 3 failed (it broke off)."
    ]
    assert any("shown: earlier result" in m.value for m in app.markdown)
