"""Bad input, through the UI: a clear message each time, and the app and the run intact."""

import json
import shutil

import pytest
import torch

from inference.core.paths import BUNDLED_MODEL_DIR
from tests.conftest import run_app

pytestmark = pytest.mark.page


def chips(at) -> int:
    """Generated-token chips in the running text."""
    return sum(
        md.value.count('class="token-chip" tabindex') + md.value.count('class="token-chip special" tabindex')
        for md in at.markdown
        if "token-box" in md.value
    )


def step(at, times=1):
    for _ in range(times):
        at.button(key="gen_step").click().run()
        assert not at.exception
    return at


def messages(at) -> str:
    return " ".join(e.value for e in [*at.warning, *at.info, *at.error])


@pytest.fixture
def app():
    return run_app()


# -- prompts -------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", ["", "   \n\t  "])
def test_empty_prompt_says_so_and_keeps_the_run(app, prompt):
    step(app, 3)
    app.text_area(key="gen_prompt").input(prompt).run()
    assert not app.exception
    assert "The prompt is empty" in messages(app)
    assert chips(app) == 3  # the last run is still shown
    step(app)  # pressing Step with an empty prompt does nothing harmful
    assert chips(app) == 3


@pytest.mark.parametrize("prompt", ["Once upon a time 🐉🌈", "مرحبا بالعالم once", "Tab\tand\u200bzero-width", "שלום"])
def test_unusual_characters_work(app, prompt):
    app.text_area(key="gen_prompt").input(prompt).run()
    step(app, 2)
    assert chips(app) == 2


def test_control_characters_and_nul_are_removed_with_a_note(app):
    app.text_area(key="gen_prompt").input("Once\x00 upon\x07 a time\x1b").run()
    assert "Removed 3 control characters" in messages(app)
    step(app)
    assert chips(app) == 1


def test_prompt_longer_than_the_context_is_cut_from_the_left_and_said(app):
    app.text_area(key="gen_prompt").input("The dog ran to the park. " * 400).run()
    assert "only the last 452 fit" in messages(app)  # 512 context - 60 new tokens (the default)
    step(app, 2)
    assert chips(app) == 2


# -- sliders and numbers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key,value",
    [
        ("gen_temperature", 0.0),
        ("gen_temperature", 2.0),
        ("gen_top_p", 0.01),
        ("gen_top_p", 1.0),
        ("gen_top_k", 1),
        ("gen_top_k", 200),
        ("gen_min_p", 1.0),
        ("gen_repetition_penalty", 0.5),
        ("gen_repetition_penalty", 2.0),
    ],
)
def test_every_slider_at_its_limits_still_steps(app, key, value):
    app.slider(key=key).set_value(value).run()
    step(app, 2)
    assert chips(app) == 2


def test_all_sliders_at_their_ends_at_once(app):
    for key, value in [
        ("gen_temperature", 2.0),
        ("gen_top_p", 0.01),
        ("gen_top_k", 200),
        ("gen_min_p", 1.0),
        ("gen_repetition_penalty", 2.0),
    ]:
        app.slider(key=key).set_value(value)
    app.run()
    step(app, 3)
    assert chips(app) == 3


@pytest.mark.parametrize(
    "query,expected",
    [
        ({"t": "abc"}, "not a float"),
        ({"seed": "-5"}, "outside"),
        ({"seed": "banana"}, "not a int"),
        ({"t": "99"}, "clamped"),
        ({"max": "100000"}, "clamped"),
        ({"p": "nan"}, "not a float"),
        ({"n": "-3"}, "outside"),
    ],
)
def test_bad_url_parameters_are_reported_and_defaulted(query, expected):
    at = run_app(query)
    assert expected in messages(at)
    step(at)
    assert chips(at) == 1


def test_huge_max_new_tokens_is_capped_and_the_cap_shown(app):
    widget = app.number_input(key="gen_max_new")
    assert widget.max == 300 and "Capped at 300" in widget.help


# -- models ------------------------------------------------------------------------------


def load(at, source):
    at.text_input(key="model_input").input(source).run()
    at.button(key="model_load").click().run()
    assert not at.exception
    return " ".join(e.value for e in at.sidebar.error)


def make_folder(tmp_path, kind):
    folder = tmp_path / kind
    folder.mkdir()
    if kind == "empty":
        return folder
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    if kind == "custom_code":
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_x.X"}
        (folder / "modeling_x.py").write_text("raise SystemExit\n")
    if kind == "encoder":
        config["architectures"] = ["BertForMaskedLM"]
    (folder / "config.json").write_text(json.dumps(config))
    if kind == "pickle":
        torch.save({"w": torch.zeros(1)}, folder / "pytorch_model.bin")
    elif kind == "huge":
        with open(folder / "model.safetensors", "wb") as f:
            f.truncate(40 * 10**9)  # sparse: reports 40 GB, uses no disk
    else:
        shutil.copy(BUNDLED_MODEL_DIR / "model.safetensors", folder)
    return folder


@pytest.mark.parametrize(
    "kind,expected",
    [
        ("empty", "no config.json"),
        ("pickle", "only pickle weights"),
        ("custom_code", "never runs code"),
        ("encoder", "not a causal"),
        ("huge", "GB of memory"),
    ],
)
def test_bad_model_folders_are_refused_and_the_app_keeps_working(local_server, app, tmp_path, kind, expected):
    step(app, 2)
    error = load(app, str(make_folder(tmp_path, kind)))
    assert expected in error
    assert chips(app) == 2  # the run survives a failed load
    step(app)
    assert chips(app) == 3


@pytest.mark.parametrize(
    "source,expected",
    [
        ("/no/such/folder", "Folder not found"),
        ("someone/unknown-model-id", "Cannot reach the Hugging Face hub"),
        ("not a valid id!!", "not a hub id"),
    ],
)
def test_unknown_ids_and_missing_folders_are_explained(local_server, app, source, expected):
    assert expected in load(app, source)
    step(app)
    assert chips(app) == 1


def test_a_public_server_loads_folders_only_from_its_models_folder(app, tmp_path):
    """Listening beyond localhost, a visitor cannot make the server read other paths."""
    assert "limited on this server" in load(app, str(make_folder(tmp_path, "pickle")))
    step(app)
    assert chips(app) == 1


# -- escaping ---------------------------------------------------------------------------


def test_markup_in_the_prompt_is_escaped(app):
    app.text_area(key="gen_prompt").input("<script>alert(1)</script><img src=x onerror=alert(2)>").run()
    step(app)
    box = next(md.value for md in app.markdown if "token-box" in md.value)
    assert "<script>" not in box and "<img" not in box
    assert "&#60;" in box and "&#62;" in box  # shown as characters (core.tokens.html_token_text)


# -- odd orders -------------------------------------------------------------------------


def test_buttons_in_odd_orders(app):
    app.button(key="gen_back").click().run()  # Back with nothing to undo
    app.button(key="gen_reset").click().run()
    app.button(key="gen_reset").click().run()
    assert not app.exception and chips(app) == 0
    step(app, 4)
    app.button(key="gen_back").click().run()
    app.button(key="gen_back").click().run()
    assert chips(app) == 2
    app.session_state["gen_fork_open"] = True  # the visitor opens the Fork expander
    app.run()
    app.number_input(key="gen_fork_step").set_value(0).run()
    app.button(key="gen_fork").click().run()
    assert not app.exception and chips(app) == 0
    step(app, 2)
    app.button(key="gen_reset").click().run()
    app.button(key="gen_back").click().run()
    assert not app.exception and chips(app) == 0
    app.button(key="gen_play").click().run()
    assert not app.exception and chips(app) > 0
    app.button(key="gen_step").click().run()  # Step after the run stopped
    app.button(key="gen_back").click().run()
    assert not app.exception
