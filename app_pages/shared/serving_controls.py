"""Serve many's choice of engine and of the model on it, with their notes (not a page itself)."""

from __future__ import annotations

import streamlit as st

from inference.core import real_model
from inference.engines import llamacpp
from inference.lessons.serving import experiments, random_model, real_text
from inference.lessons.serving import text as serving_text

LOCAL = "llama-server started here"
VOCAB = 4096  # the bundled tokenizer's: trace prompts are ids below it


def engine_and_model(configured: dict, presenter: bool) -> tuple[str, bool, str]:
    """(the engine, whether it is a llama-server started here, the model on it); stops the page with how to get an
    engine where there is none. Each choice only once there is one: a radio of one option takes a projector's
    screen for nothing (the note under it names the engine either way). Two choices stack in presenter mode: a half
    column made the real model's long name eight lines at 800 px."""
    engine_options = ([LOCAL] if llamacpp.is_built() else []) + list(configured)
    if not engine_options:
        st.warning(serving_text.NO_ENGINE)
        st.stop()
    both = len(engine_options) > 1 and LOCAL in engine_options
    c1, c2 = st.columns(2) if both and not presenter else (st.container(), st.container())
    engine = engine_options[0]
    if len(engine_options) > 1:
        engine = c1.radio("Engine", engine_options, horizontal=True, key="serving_engine", persist_state="session")
    local = engine == LOCAL
    if not local:  # an engine started elsewhere serves the model it was started with
        st.caption(serving_text.external_engine_note(engine, configured[engine]))
        return engine, local, engine
    model_key = c2.radio(
        "Model on the engine",
        experiments.model_options(VOCAB),
        horizontal=True,
        key="serving_model",
        persist_state="session",
        format_func=lambda k: experiments.model_choice_label(k, local, random_model.LABEL),
    )
    st.caption(serving_text.local_engine_note(llamacpp.cache_dir()))
    if model_key == experiments.REAL:
        # A caption, not a box: the radio above names the model; on a projector a box of it took the first screen
        st.caption(serving_text.real_model_note(experiments.REAL_LABEL, len(real_text.QUESTIONS)))
    elif model_key != experiments.BUNDLED:
        if not real_model.is_available():
            st.caption(serving_text.REAL_FALLBACK)
        shape = random_model.public_shape(model_key, VOCAB)
        st.caption(serving_text.random_shape_note(model_key, random_model.LABEL, shape, VOCAB))
    return engine, local, model_key
