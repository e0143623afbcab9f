"""Bad input through the app: a message each time, never a traceback, and the run intact; the server's thread
setting and Streamlit's configuration."""

import threading

import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.conftest import APP_FILE, run_app
from tests.test_loading import bad_folder

pytestmark = pytest.mark.page


def chips(at) -> int:
    """Generated-token chips in the running text."""
    boxes = [md.value for md in at.markdown if "token-box" in md.value]
    return sum(b.count('class="token-chip" tabindex') + b.count('class="token-chip special" tabindex') for b in boxes)


def step(at, times=1):
    for _ in range(times):
        at.button(key="gen_step").click().run()
        assert not at.exception
    return at


def messages(at) -> list[str]:
    return [e.value for e in [*at.warning, *at.info, *at.error]]


@pytest.fixture
def app():
    return run_app()


UNUSUAL_PROMPTS = {
    "Once upon a time 🐉🌈": False,
    "مرحبا بالعالم once\u200b\t": False,
    "Once\x00 upon\x07 a time\x1b": True,  # control characters removed, with a note
    "The dog ran to the park. " * 400: True,  # longer than the context: cut from the left, with a note
}


def test_unusual_prompts_step(app):
    for prompt, said in UNUSUAL_PROMPTS.items():
        before = messages(app)
        app.text_area(key="gen_prompt").input(prompt).run()
        assert (messages(app) != before) is said, repr(prompt[:30])
        step(app, 2)
        assert chips(app) == 2  # a new prompt starts a new run


def test_every_slider_at_its_ends_still_steps(app):
    for key, value in [("gen_temperature", 0.0), ("gen_top_p", 0.01), ("gen_top_k", 1),
                       ("gen_repetition_penalty", 0.5)]:  # fmt: skip
        app.slider(key=key).set_value(value)
    app.run()
    step(app)
    for key, value in [("gen_temperature", 2.0), ("gen_top_p", 1.0), ("gen_top_k", 200), ("gen_min_p", 1.0),
                       ("gen_repetition_penalty", 2.0)]:  # fmt: skip
        app.slider(key=key).set_value(value)
    app.run()
    step(app, 2)
    assert chips(app) == 3
    assert app.number_input(key="gen_max_new").max == 300  # the server's cap


def test_bad_url_parameters_are_reported_one_by_one_and_defaulted():
    at = run_app({"t": "abc", "seed": "banana", "max": "100000", "p": "nan", "n": "-3"})
    assert len(messages(at)) >= 5
    step(at)
    assert chips(at) == 1


def load(at, source) -> list[str]:
    at.text_input(key="model_input").input(source).run()
    at.button(key="model_load").click().run()
    assert not at.exception
    return [e.value for e in at.sidebar.error]


def test_a_failed_load_is_explained_and_the_run_survives(local_server, app, tmp_path):
    step(app, 2)
    bad_folder(tmp_path, "pickle")
    assert load(app, str(tmp_path)) and load(app, "someone/unknown-model-id")
    step(app)
    assert chips(app) == 3


def test_a_public_server_refuses_folders_outside_its_models_folder(app, tmp_path):
    bad_folder(tmp_path, "pickle")
    assert load(app, str(tmp_path))


def test_markup_empty_prompts_and_buttons_in_odd_orders_keep_the_run(app):
    app.button(key="gen_back").click().run()  # Back with nothing to undo
    app.button(key="gen_reset").click().run()
    assert not app.exception and chips(app) == 0
    app.text_area(key="gen_prompt").input("<script>alert(1)</script><img src=x onerror=alert(2)>").run()
    step(app, 4)
    box = next(md.value for md in app.markdown if "token-box" in md.value)
    assert "<script>" not in box and "<img" not in box and "&#60;" in box  # shown as text
    app.button(key="gen_back").click().run()
    app.button(key="gen_back").click().run()
    assert chips(app) == 2
    app.session_state["gen_fork_open"] = True  # the visitor opens the Fork expander
    app.run()
    app.number_input(key="gen_fork_step").set_value(0).run()
    app.button(key="gen_fork").click().run()
    assert not app.exception and chips(app) == 0
    app.button(key="gen_play").click().run()
    assert not app.exception and chips(app) > 0
    app.button(key="gen_step").click().run()  # Step after the run stopped
    app.button(key="gen_back").click().run()
    made = chips(app)
    app.text_area(key="gen_prompt").input("  \n\t ").run()
    assert not app.exception and messages(app)  # an empty prompt says so, and Step does nothing harmful
    step(app)
    assert chips(app) == made


def threads_in_a_new_thread() -> int:
    """What a new thread (each Streamlit rerun runs in one) gets from the process-wide setting."""
    seen = []
    worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    worker.start()
    worker.join()
    return seen[0]


def test_the_app_runs_torch_with_the_configured_threads(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("INFERENCE_LAB_TORCH_THREADS", "3")
        AppTest.from_file(APP_FILE, default_timeout=120).run()
        assert threads_in_a_new_thread() == 3
        monkeypatch.delenv("INFERENCE_LAB_TORCH_THREADS")
        AppTest.from_file(APP_FILE, default_timeout=120).run()
        assert threads_in_a_new_thread() == 1
    finally:
        torch.set_num_threads(before)


def test_streamlit_neither_collects_garbage_after_every_run_nor_gathers_statistics():
    """.streamlit/config.toml: gc.collect(2) after each run held the GIL ~300 ms with torch loaded; the usage
    statistics built a message after every run."""
    from streamlit import config

    config.get_config_options(force_reparse=True)  # reads ./.streamlit/config.toml, as `streamlit run` does
    assert config.get_option("runner.postScriptGC") is False
    assert config.get_option("browser.gatherUsageStats") is False
