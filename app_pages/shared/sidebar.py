"""The sidebar every page draws (model picker, engine picker, presenter toggle), and `current_model()`,
which draws it and returns the visitor's model."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.shared import keys
from app_pages.shared import models as m
from app_pages.shared.layout import LAYOUT_CSS, PRESENTER_CSS, presenter
from app_pages.shared.models import ENGINE_ERROR_KEY, ENGINE_URL_KEY, MODEL_ERROR_KEY, MODEL_SOURCE_KEY
from inference.core.loader import LoadedModel, ModelLoadError
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.remote import RemoteModel
from inference.engines.client import EngineError

LOCAL_ENGINE = "In this app (transformers)"


def source_label(source: str, shipped) -> str:
    """A shipped model's name, a folder's name (never its filesystem path), or a hub id as typed."""
    for model in shipped:
        if source and source in (model.source, str(model.folder)):
            return model.name
    if Path(source).is_absolute() or Path(source).exists():
        return Path(source).name
    return source


def current_model(remote_ok: bool = False, needs_weights: str = "it works on the weights") -> LoadedModel | RemoteModel:
    """The visitor's model, after drawing the sidebar (by each page: what app.py draws vanishes on reruns under
    AppTest). A failed load falls back to the bundled model. With an engine picked, a page that can run on it
    (`remote_ok`) gets a `RemoteModel`; the others say why not (`needs_weights`)."""
    model_sidebar()
    url = st.session_state.get(ENGINE_URL_KEY, "")
    if url and remote_ok:
        try:
            with st.spinner(f"Connecting to {url}…"):
                return m.cached_engine(url)
        except EngineError as err:
            st.session_state[ENGINE_ERROR_KEY], st.session_state[ENGINE_URL_KEY] = str(err), ""
    elif url:
        st.info(
            f"This page needs the model's weights in this process ({needs_weights}), so it runs on the local model, "
            "not on the serving engine picked in the sidebar. Generate, Sampling lab and Prefill vs decode run on the "
            "engine.",
            icon="ℹ️",
        )
    source = st.session_state.get(MODEL_SOURCE_KEY, "")
    if not source:
        return m.bundled_model()
    try:
        with st.spinner(f"Loading {source}…"):
            return m.cached_model(source, "float32", m.server_is_public())
    except ModelLoadError as err:
        st.session_state[MODEL_ERROR_KEY], st.session_state[MODEL_SOURCE_KEY] = str(err), ""
        return m.bundled_model()


def _use(key: str, value: str, error_key: str) -> None:
    st.session_state[key] = value
    st.session_state.pop(error_key, None)


def _pick_bundled() -> None:
    picked = {b.name: b.source for b in m.shipped_models()}.get(st.session_state.get("model_bundled_pick"))
    if picked is not None:
        _use(MODEL_SOURCE_KEY, picked, MODEL_ERROR_KEY)


def bundled_picker(source: str) -> None:
    """The models that run offline, by name with one line each; picking one loads it."""
    shipped = m.shipped_models()
    if len(shipped) < 2:
        return
    # follows loads made elsewhere (a typed folder, a page's button)
    st.session_state["model_bundled_pick"] = next((b.name for b in shipped if b.source == source), None)
    st.radio("Offline models", [b.name for b in shipped], key="model_bundled_pick", persist_state="session",
             on_change=_pick_bundled, captions=[b.line for b in shipped])  # fmt: skip


def engine_sidebar() -> None:
    """Where the model runs: here or on a serving engine. A public server offers only INFERENCE_LAB_ENGINES (a typed
    URL would let visitors make it fetch any address); `?engine=<name>` in the link picks one."""
    engines = m.limits().engine_urls()
    typed_allowed = not m.server_is_public()
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
    picked = lambda: _use(ENGINE_URL_KEY, engines.get(st.session_state.get("engine_pick"), ""), ENGINE_ERROR_KEY)
    st.selectbox("Runs the model", [LOCAL_ENGINE, *engines], key="engine_pick", persist_state="session",
                 on_change=picked, help="A serving engine runs the model; this app asks it for each step's distribution.")  # fmt: skip
    if typed_allowed:
        typed = st.text_input("Or an engine URL (this computer only)", key="engine_url_input", persist_state="session",
                              placeholder="http://127.0.0.1:8080",
                              help="llama.cpp's llama-server or vLLM. Only offered when the app listens on localhost.")  # fmt: skip
        if st.button("Connect", key="engine_connect", width="stretch") and typed.strip():
            try:
                m.cached_engine(typed.strip())
                _use(ENGINE_URL_KEY, typed.strip(), ENGINE_ERROR_KEY)
            except EngineError as err:
                st.session_state[ENGINE_ERROR_KEY] = str(err)
            st.rerun()
    if url:
        st.caption(f"Engine in use: `{url}`")
        st.button("Run in this app instead", key="engine_local", width="stretch", on_click=_use,
                  args=(ENGINE_URL_KEY, "", ENGINE_ERROR_KEY))  # fmt: skip
    if st.session_state.get(ENGINE_ERROR_KEY):
        st.error(st.session_state[ENGINE_ERROR_KEY], icon="⚠️")


def model_sidebar() -> None:
    """Model picker and presenter toggle, in the sidebar of every page."""
    default, default_note = m.default_source()
    if MODEL_SOURCE_KEY not in st.session_state:  # a new session opens on the server's default model
        st.session_state[MODEL_SOURCE_KEY] = default
    with st.sidebar:
        st.markdown("### Model")
        source = st.session_state.get(MODEL_SOURCE_KEY, "")
        st.caption(f"In use: **{source_label(source, m.shipped_models()) or BUNDLED_MODEL_NAME + ' (bundled)'}**")
        if default_note:
            st.caption(default_note)
        bundled_picker(source)
        typed = st.text_input("Hub id or local folder", key="model_input", persist_state="session",
                              placeholder="e.g. gpt2 or HuggingFaceTB/SmolLM2-135M",
                              help="Leave empty for the bundled model. Hub models need internet the first time.")  # fmt: skip
        # One button a row: side by side, a projector's larger text cut their labels short.
        if st.button("Load model", key="model_load", width="stretch"):
            attempt = typed.strip()
            try:
                if attempt:
                    with st.spinner(f"Loading {attempt}…"):
                        m.cached_model(attempt, "float32", m.server_is_public())
                _use(MODEL_SOURCE_KEY, attempt, MODEL_ERROR_KEY)
            except ModelLoadError as err:
                st.session_state[MODEL_ERROR_KEY] = str(err)
            st.rerun()
        st.button("Back to the bundled model", key="model_bundled", width="stretch", on_click=_use,
                  args=(MODEL_SOURCE_KEY, "", MODEL_ERROR_KEY))  # fmt: skip
        if st.session_state.get(MODEL_ERROR_KEY):
            st.error(st.session_state[MODEL_ERROR_KEY], icon="⚠️")
        engine_sidebar()
        st.divider()
        st.toggle(
            "Presenter mode", key="presenter", persist_state="session", help="Larger text and charts for a projector"
        )
        keys.install()  # every page: the key listener, the skip link, the roles of Streamlit's sidebar list
    st.markdown(LAYOUT_CSS + (PRESENTER_CSS if presenter() else ""), unsafe_allow_html=True)
