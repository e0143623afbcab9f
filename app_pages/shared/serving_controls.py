"""Serve many's choice of engine and of the model on it, with their notes (not a page itself)."""

from __future__ import annotations

import streamlit as st

from inference.core import real_model
from inference.engines import llamacpp
from inference.lessons.serving import models
from inference.lessons.serving.request_trace import QUESTIONS, SHAPES
from inference.lessons.serving.text import TEXT

LOCAL = "llama-server started here"
VOCAB = 4096  # the bundled tokenizer's: trace prompts are ids below it
# Opens where one slot falls behind on the bundled model: alone it streams roughly 500 short-chat tokens/s on a
# 2-core CPU (docs/BENCHMARKS.md's serving figures), and the default 16 draws at 16/s ask for about 680 over their 1.3 s.
DEFAULT_RATE = 16.0


def engine_and_model(configured: dict, presenter: bool, draw: bool = True) -> tuple[str, bool, str]:
    """(the engine, whether it is a llama-server started here, the model on it); stops the page with how to get an
    engine where there is none. Each choice only once there is one: a radio of one option takes a projector's
    screen for nothing (the note under it names the engine either way). Two choices stack in presenter mode: a half
    column made the real model's long name eight lines at 800 px. With `draw` False (presenter mode's settings
    folded) nothing is drawn: the choices kept in the session, else the first of each."""
    engine_options = ([LOCAL] if llamacpp.is_built() else []) + list(configured)
    if not engine_options:
        st.warning(TEXT["no_engine"])
        st.stop()
    if not draw:
        engine = kept_choice("serving_engine", engine_options)
        if engine != LOCAL:
            return engine, False, engine
        return engine, True, kept_choice("serving_model", models.model_options(VOCAB))
    both = len(engine_options) > 1 and LOCAL in engine_options
    c1, c2 = st.columns(2) if both and not presenter else (st.container(), st.container())
    engine = engine_options[0]
    if len(engine_options) > 1:
        engine = c1.radio("Engine", engine_options, horizontal=True, key="serving_engine", persist_state="session")
    local = engine == LOCAL
    if not local:  # an engine started elsewhere serves the model it was started with
        st.caption(TEXT["external_engine"].format(name=engine, url=configured[engine]))
        return engine, local, engine
    model_key = c2.radio(
        "Model on the engine",
        models.model_options(VOCAB),
        horizontal=True,
        key="serving_model",
        persist_state="session",
        format_func=lambda k: models.model_choice_label(k, local),
    )
    if model_key == models.REAL:  # a caption, not a box: the radio above names the model
        mb = models.weight_file(model_key).stat().st_size / 1e6
        st.caption(TEXT["real_model"].format(questions=len(QUESTIONS), mb=mb))
    elif model_key != models.BUNDLED:
        if not real_model.is_available():
            st.caption(TEXT["real_fallback"])
        shape = models.public_shape(model_key, VOCAB)
        fields = dict(parameters_m=shape.parameters() / 1e6, mb=shape.float32_bytes() / 1e6, vocab=VOCAB)
        st.caption(TEXT["random_shape"].format(key=model_key, label=models.LABEL, shape=shape, **fields))
    return engine, local, model_key


def kept_choice(key: str, options: list[str]) -> str:
    """A radio's value while it is not drawn: the session's, when it is still among the options, else the first."""
    kept = st.session_state.get(key)
    return kept if kept in options else options[0]


TRAFFIC_DEFAULTS = {
    "serving_shape": next(iter(SHAPES)),
    "serving_rate": DEFAULT_RATE,
    "serving_requests": 16,
    "serving_seed": 0,
}
RATES = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def traffic(draw: bool = True) -> tuple[str, float, int, int]:
    """The trace's settings (shape, arrival rate, requests, seed): as widgets, or (`draw` False, presenter mode's
    settings folded) as the session keeps them."""
    for key, value in TRAFFIC_DEFAULTS.items():
        st.session_state.setdefault(key, value)
    if draw:
        c1, c2 = st.columns(2)
        c3, c4 = st.columns(2)
        c1.selectbox("Requests like", list(SHAPES), key="serving_shape", persist_state="session")
        c2.select_slider("Arrival rate λ (requests/s)", RATES, key="serving_rate", persist_state="session")
        c3.slider("Requests", 4, 48, step=4, key="serving_requests", persist_state="session")
        c4.number_input("Seed", 0, 10_000, key="serving_seed", persist_state="session")
    state = st.session_state
    return state.serving_shape, state.serving_rate, int(state.serving_requests), int(state.serving_seed)
