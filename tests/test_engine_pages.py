"""Pages on a serving engine (AppTest, the stand-in llama.cpp server of tests/fake_engine.py): Generate steps
through it, a stopped engine shows one sentence and keeps the run, pages that need the weights say so, a truncated
answer is never captioned exact, and a public server offers only the engines INFERENCE_LAB_ENGINES names."""

import pytest
import streamlit as st

from inference.core import remote
from inference.core.remote import RemoteForward
from tests.conftest import run_app
from tests.fake_engine import FakeLlamaServer

pytestmark = pytest.mark.page


@pytest.fixture
def fake(bundled, monkeypatch):
    server = FakeLlamaServer(bundled)
    monkeypatch.setenv("INFERENCE_LAB_ENGINES", f"fake={server.url}")
    st.cache_resource.clear()  # limits() and engine connections are read again from this environment
    yield server
    server.stop()
    st.cache_resource.clear()


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


def test_generate_steps_on_a_named_engine_and_keeps_its_run_when_the_engine_stops(fake):
    at = run_app({"engine": "fake", "t": "0.8"})
    for _ in range(3):
        at.button(key="gen_step").click().run()
    trace = at.session_state["gen_trace"]
    assert not at.exception and isinstance(trace.forward, RemoteForward) and len(trace.records) == 3
    assert any("returned all 4,096 token probabilities" in c for c in captions(at))
    assert any("Computed exactly.** Tokens in order" in c for c in captions(at))
    kept = list(trace.generated_ids)
    fake.stop()  # a stopped engine: one sentence, the run kept
    at.button(key="gen_step").click().run()
    assert not at.exception and any("Cannot connect to the engine" in e.value for e in at.error)
    assert at.session_state["gen_trace"].generated_ids[:3] == kept


@pytest.mark.parametrize("page", ["app_pages/kv-cache.py", "app_pages/quantization.py"])
def test_pages_that_need_the_weights_say_why_and_run_locally(fake, page):
    at = run_app({"engine": "fake"})
    at.switch_page(page).run()
    assert not at.exception and any("needs the model's weights in this process" in i.value for i in at.info)


def test_a_public_server_offers_only_the_configured_engines_and_a_local_one_a_typed_url(fake, monkeypatch, request):
    at = run_app()  # AppTest's server address is not loopback: a public server
    assert at.selectbox(key="engine_pick").options == ["In this app (transformers)", "fake"]
    assert not [t for t in at.text_input if t.key == "engine_url_input"]
    request.getfixturevalue("local_server")
    monkeypatch.delenv("INFERENCE_LAB_ENGINES")
    st.cache_resource.clear()
    at = run_app()
    at.text_input(key="engine_url_input").set_value(fake.url).run()
    at.button(key="engine_connect").click().run()
    assert not at.exception and at.session_state["engine_url"] == fake.url
    at.button(key="gen_step").click().run()
    assert isinstance(at.session_state["gen_trace"].forward, RemoteForward)


def test_an_engines_top_n_is_captioned_measured_on_generate_and_the_sampling_lab(fake, monkeypatch):
    """Above the whole-vocabulary limit the pages ask for the top 1,000: the bars, the cumulative curve and the
    Sampling lab show a renormalised top N, and no caption may say Computed exactly."""
    monkeypatch.setattr(remote, "FULL_VOCABULARY_LIMIT", 1_024)  # the bundled model's 4,096 tokens are now "large"
    at = run_app({"engine": "fake"})
    at.button(key="gen_step").click().run()
    assert not at.exception
    for words in ("Truncated: the engine (llama.cpp) returned its top 1,000", "Tokens in order", "Top tokens by"):
        assert any(f"Measured.** {words}" in c for c in captions(at)), words
    assert not any("Computed exactly" in c for c in captions(at) if "Top tokens" in c or "Tokens in order" in c)
    at.switch_page("app_pages/sampling.py").run()
    assert not at.exception and any(
        "Truncated: the engine (llama.cpp) returned its top 1,000" in c for c in captions(at)
    )
    assert not any("Computed exactly" in c for c in captions(at))
