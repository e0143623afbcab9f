"""Server limits come from INFERENCE_LAB_* environment variables; the app applies the thread count."""

import threading

import pytest
import torch
from streamlit.testing.v1 import AppTest

from inference.core.limits import Limits
from tests.conftest import APP_FILE

pytestmark = pytest.mark.page


def test_limits_read_ints_bools_and_paths_from_the_environment():
    limits = Limits.from_env(
        {
            "INFERENCE_LAB_MAX_NEW_TOKENS": "400",
            "INFERENCE_LAB_ALLOW_HUB": "no",
            "INFERENCE_LAB_MODELS_FOLDER": "/srv/models",
            "INFERENCE_LAB_TORCH_THREADS": "4",
            "OTHER_VARIABLE": "ignored",
        }
    )
    assert (limits.max_new_tokens, limits.allow_hub, limits.models_folder, limits.torch_threads) == (
        400,
        False,
        "/srv/models",
        4,
    )
    assert Limits.from_env({}) == Limits()
    assert Limits().torch_threads == 1  # the browser and other visitors share the CPU: see Limits


def threads_in_a_new_thread() -> int:
    """What a new thread (each Streamlit rerun runs in one) gets: torch sets it up from the
    process-wide value; a thread that already asked keeps its own."""
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


def test_streamlit_does_not_collect_garbage_after_every_run():
    """.streamlit/config.toml switches Streamlit's gc.collect(2) after each script run off:
    with torch and transformers loaded it held the GIL ~300 ms and stalled every session."""
    from streamlit import config

    config.get_config_options(force_reparse=True)  # reads ./.streamlit/config.toml, as `streamlit run` does
    assert config.get_option("runner.postScriptGC") is False


def test_streamlit_gathers_no_usage_statistics():
    """.streamlit/config.toml switches usage statistics off for `streamlit run app.py` too (the README's first
    command), not only for the servers the bench and tests start: they build a page-profile message after every
    run, ~3 ms of server CPU a Step."""
    from streamlit import config

    config.get_config_options(force_reparse=True)
    assert config.get_option("browser.gatherUsageStats") is False
