"""A background measurement leaves the page usable: the press returns at once with a bar and a Cancel, another
widget reruns the page while it goes on, and the result is kept and drawn once it ends; a Cancel keeps nothing; a
failing measurement is one sentence that keeps the earlier result."""

import threading

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared.shared_results import background_runs, shared_results

pytestmark = pytest.mark.page

GATE = threading.Event()


def _page():
    import streamlit as st

    from app_pages.shared.shared_results import measure_on_click
    from tests.test_shared_results_page import GATE

    steps = st.slider("Other widget", 1, 10, 3, key="other_widget")

    def measure(progress):
        for i in range(4):
            GATE.wait(10)
            progress(i + 1, 4, "fake step")
        return f"measured {steps}"

    result = measure_on_click("Measure", "bg_button", ("bg-page-test", steps), measure, "Not yet.", background=True)
    st.write(f"shown: {result}")


def _shown(app, text):
    return any(f"shown: {text}" in m.value for m in app.markdown)


def test_the_page_stays_usable_while_it_measures_and_keeps_the_result():
    GATE.clear()
    app = AppTest.from_function(_page, default_timeout=30).run()
    app.button(key="bg_button").click().run()  # returns at once: the measurement waits on GATE
    assert not app.exception and app.get("progress") and app.button(key="bg_button_cancel") and _shown(app, "None")
    app.run()  # the page drawn again during the run: the press is not offered twice
    assert app.button(key="bg_button").disabled and app.get("progress")
    app.slider(key="other_widget").set_value(5).run()  # another widget works during the run
    assert not app.exception and _shown(app, "None")
    GATE.set()
    background_runs().wait_all(timeout=10)
    app.slider(key="other_widget").set_value(3).run()
    assert not app.exception and _shown(app, "measured 3") and not app.get("progress")
    fresh = AppTest.from_function(_page, default_timeout=30).run()  # another visitor sees the kept result
    assert _shown(fresh, "measured 3")


def test_cancel_keeps_nothing_and_says_so():
    GATE.clear()
    app = AppTest.from_function(_page, default_timeout=30).run()
    app.slider(key="other_widget").set_value(7).run()
    app.button(key="bg_button").click().run()
    app.button(key="bg_button_cancel").click().run()
    GATE.set()
    background_runs().wait_all(timeout=10)
    app.run()
    assert not app.exception and ("bg-page-test", 7) not in shared_results()
    assert any("Cancelled" in i.value for i in app.info)


def _failing_page():
    import streamlit as st

    from app_pages.shared.shared_results import measure_on_click, shared_results
    from inference.engines.client import EngineError

    shared_results()["failing-measurement-test"] = "earlier result"

    def measure(progress):
        progress(0, 1, "measuring")
        raise EngineError("request 3 failed (it broke off).")

    st.write(f"shown: {measure_on_click('Measure', 'measure_button', 'failing-measurement-test', measure, 'Not yet.')}")


def test_a_failing_measurement_is_one_sentence_and_keeps_the_earlier_result():
    app = AppTest.from_function(_failing_page, default_timeout=60).run()
    app.button(key="measure_button").click().run()
    assert not app.exception
    assert len(app.error) == 1 and "request 3 failed (it broke off)." in app.error[0].value
    assert any("shown: earlier result" in m.value for m in app.markdown)
