"""Streamlit glue shared by every page (not a page itself).

Models live in `st.cache_resource` (one per model and precision, shared by every session,
never mutated); everything per visitor lives in `st.session_state`.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Collection, Hashable
from contextlib import contextmanager

import streamlit as st

from inference.core.bundled import BundledModel, bundled_models
from inference.core.limits import Limits
from inference.core.loader import LoadedModel, ModelLoadError, load_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.remote import RemoteModel, connect
from inference.engines.client import EngineError

MODEL_SOURCE_KEY = "model_source"  # what the visitor asked for ("" = bundled)
MODEL_ERROR_KEY = "model_error"
ENGINE_URL_KEY = "engine_url"  # the serving engine the visitor picked ("" = run the model in this process)
ENGINE_ERROR_KEY = "engine_error"
LOCAL_ENGINE = "In this app (transformers)"


@st.cache_resource
def limits() -> Limits:
    return Limits.from_env()


def server_is_public() -> bool:
    """True unless the server listens on loopback only."""
    address = (st.get_option("server.address") or "").strip()
    return address not in ("localhost", "127.0.0.1", "::1")


@st.cache_resource(max_entries=Limits.from_env().max_cached_models, show_spinner=False)
def _cached_model(source: str, dtype: str, public: bool) -> LoadedModel:
    return load_model(source, dtype, limits(), server_is_public=public)


def bundled_model() -> LoadedModel:
    return _cached_model("", "float32", False)


def current_model(remote_ok: bool = False, needs_weights: str = "it works on the weights") -> LoadedModel | RemoteModel:
    """The visitor's model, after drawing the shared sidebar. If loading fails, the message
    is kept for the sidebar and the bundled model is used, so every page keeps working.
    With a serving engine picked, pages that can run on it (`remote_ok`) get a `RemoteModel`; the
    others say why they need the weights here (`needs_weights`) and get the local model.

    The sidebar is drawn from here, by each page, rather than once in app.py: elements
    app.py draws around `st.navigation(...).run()` vanish on reruns under AppTest."""
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
                    return _cached_engine(url)
            except EngineError as err:
                st.session_state[ENGINE_ERROR_KEY] = str(err)
                st.session_state[ENGINE_URL_KEY] = ""
    source = st.session_state.get(MODEL_SOURCE_KEY, "")
    if not source:
        return bundled_model()
    try:
        with st.spinner(f"Loading {source}…"):
            return _cached_model(source, "float32", server_is_public())
    except ModelLoadError as err:
        st.session_state[MODEL_ERROR_KEY] = str(err)
        st.session_state[MODEL_SOURCE_KEY] = ""
        return bundled_model()


@st.cache_data(ttl=300, show_spinner=False)
def _bundled_models() -> list[BundledModel]:
    return bundled_models()


def _pick_bundled() -> None:
    picked = st.session_state.get("model_bundled_pick")
    for m in _bundled_models():
        if m.name == picked:
            st.session_state[MODEL_SOURCE_KEY] = m.source
            st.session_state.pop(MODEL_ERROR_KEY, None)


def bundled_picker(source: str) -> None:
    """The models shipped in assets/models, by name with one line each; picking one loads it."""
    models = _bundled_models()
    if len(models) < 2:
        return
    current = next((m.name for m in models if m.source == source), None)
    st.session_state["model_bundled_pick"] = current  # follows loads made elsewhere (typed folder, page buttons)
    st.radio(
        "Bundled models",
        [m.name for m in models],
        key="model_bundled_pick",
        on_change=_pick_bundled,
        captions=[m.line for m in models],
    )


@st.cache_resource(max_entries=4, show_spinner=False)
def _cached_engine(url: str) -> RemoteModel:
    """One connection per engine URL, shared by every session (httpx's client is thread-safe)."""
    return connect(url)


def _run_locally() -> None:
    st.session_state[ENGINE_URL_KEY] = ""
    st.session_state.pop(ENGINE_ERROR_KEY, None)


def _pick_engine() -> None:
    picked = st.session_state.get("engine_pick")
    st.session_state[ENGINE_URL_KEY] = limits().engine_urls().get(picked, "")
    st.session_state.pop(ENGINE_ERROR_KEY, None)


def engine_sidebar() -> None:
    """Where the model runs: in this process, or on a serving engine. A public server offers only the
    engines INFERENCE_LAB_ENGINES names (a typed URL would let visitors make it fetch any address);
    on localhost a URL may be typed. `?engine=<name>` in the link picks a named one."""
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
        on_change=_pick_engine,
        help="A serving engine runs the model; this app asks it for each step's distribution.",
    )
    if typed_allowed:
        typed = st.text_input(
            "Or an engine URL (this computer only)",
            key="engine_url_input",
            placeholder="http://127.0.0.1:8080",
            help="llama.cpp's llama-server or vLLM. Only offered when the app listens on localhost.",
        )
        if st.button("Connect", key="engine_connect", width="stretch") and typed.strip():
            try:
                _cached_engine(typed.strip())
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
    with st.sidebar:
        st.markdown("### Model")
        source = st.session_state.get(MODEL_SOURCE_KEY, "")
        st.caption(f"In use: **{source or BUNDLED_MODEL_NAME + ' (bundled)'}**")
        bundled_picker(source)
        typed = st.text_input(
            "Hub id or local folder",
            key="model_input",
            placeholder="e.g. gpt2 or HuggingFaceTB/SmolLM2-135M",
            help="Leave empty for the bundled model. Hub models need internet the first time.",
        )
        # One button a row: side by side, a projector's larger text cut their labels short.
        if st.button("Load model", key="model_load", width="stretch"):
            attempt = typed.strip()
            try:
                if attempt:
                    with st.spinner(f"Loading {attempt}…"):
                        _cached_model(attempt, "float32", server_is_public())
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
        st.toggle("Presenter mode", key="presenter", help="Larger text and charts for a projector")
    if presenter():
        st.markdown(
            """<style>
            html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.35rem !important; }
            [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 2.6rem !important; }
            .token-chip { font-size: 1.6rem !important; }
            [data-testid="stSidebarNavLink"] [data-testid="stMarkdownContainer"] p { font-size: 0.8rem !important; }
            </style>""",
            unsafe_allow_html=True,
        )


def presenter() -> bool:
    return bool(st.session_state.get("presenter", False))


def side_by_side(count: int = 2) -> list:
    """Columns for charts: side by side normally; stacked full width in presenter mode, where
    projector-sized text would leave half-width charts no room for their bars."""
    if presenter():
        return [st.container() for _ in range(count)]
    return st.columns(count)


def control_row(count: int) -> list:
    """Columns for a row of sliders: in presenter mode at most three a row, so that their
    larger labels stay whole."""
    if not presenter() or count <= 3:
        return st.columns(count)
    return st.columns(3) + st.columns(3)[: count - 3]


CAPTION_KINDS = {  # the project's one vocabulary for how a number was obtained
    "measured": "📏 Measured",  # timed or read on this machine
    "exact": "🧮 Computed exactly",  # deterministic arithmetic on the model's outputs
    "simulated": "🎲 Simulated",  # random draws
    "published": "📚 Published",  # public configs and reports
    "illustrative": "🎨 Illustrative",  # made-up numbers for a picture
}


def caption(kind: str, text: str) -> None:
    """The one line under every chart and table: what it shows, and how its numbers were obtained
    (`kind` is one of CAPTION_KINDS)."""
    if kind not in CAPTION_KINDS:
        raise ValueError(f"caption kind must be one of {sorted(CAPTION_KINDS)}, got {kind!r}")
    st.caption(f"**{CAPTION_KINDS[kind]}.** {text}")


def view_summary(view) -> None:
    """The step's key numbers in one readable line (metrics would truncate them)."""
    parts = [
        f"**Entropy** {view.entropy_raw_bits:.2f} → {view.entropy_final_bits:.2f} bits",
        f"**Kept** {view.kept[view.final_stage]:,} of {len(view.order):,} tokens",
        f"**Nucleus** {view.nucleus_size:,} tokens holding {view.nucleus_mass:.1%}",
    ]
    if view.settings.greedy:
        parts.append("**Draw** greedy: always the top token")
    elif view.u is not None:
        parts.append(f"**Draw** u = {view.u:.3f} lands on rank {view.chosen_rank + 1:,}")
    st.markdown(" &nbsp;·&nbsp; ".join(parts))


def read_url_once(
    flag: str,
    url_params: dict[str, tuple[str, type]],
    defaults: dict[str, object],
    ranges: dict[str, tuple],
    names: dict[str, str] | None = None,
    choices: dict[str, tuple[Collection, str]] | None = None,
) -> list[str]:
    """On a session's first run (session key `flag` unset), give every widget key its default, then copy each
    URL parameter (`param -> (widget key, type)`) into its widget: a number outside `ranges` is clamped (`names`
    says what it sets), a value that cannot be read or that `choices` (key -> allowed values, the rest of the
    sentence) does not allow keeps the default. Returns one sentence per problem; nothing on later runs."""
    problems = []
    if st.session_state.get(flag):
        return problems
    st.session_state[flag] = True
    for key, value in defaults.items():
        st.session_state.setdefault(key, value)
    for param, (key, kind) in url_params.items():
        if param not in st.query_params:
            continue
        raw = st.query_params[param]
        try:
            value = kind(raw)
            if kind is float and value != value:
                raise ValueError
        except ValueError:
            problems.append(f"`{param}={raw[:30]}` in the link is not a {kind.__name__}; using the default.")
            continue
        if choices and key in choices and value not in choices[key][0]:
            problems.append(f"`{param}={raw[:30]}` {choices[key][1]}")
            continue
        if key in ranges:
            low, high = ranges[key]
            if not low <= value <= high:
                clamped = min(max(value, low), high)
                named = f" for {names[key]}" if names and key in names else ""
                problems.append(f"`{param}={raw}` is outside {low}–{high}{named}; clamped to {clamped}.")
                value = clamped
        st.session_state[key] = value
    return problems


def escape(text: str) -> str:
    return html.escape(text, quote=True)


@st.cache_resource
def _generation_slots() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(limits().max_concurrent_generations)


def session_lock() -> threading.RLock:
    """One visitor's runs take turns on their trace. A click during a run starts the next
    run before the old one has reached a point where Streamlit can stop it, so without
    this two runs could feed the same KV cache at once."""
    return st.session_state.setdefault("_trace_lock", threading.RLock())


@contextmanager
def model_slot():
    """One of the server's `max_concurrent_generations` model slots, waiting silently. For work
    inside an `st.cache_data` function: it runs only on a cache miss, so a hit never waits, and
    it draws nothing (a message drawn there would be replayed on every hit)."""
    with _generation_slots():
        yield


@contextmanager
def generation_slot():
    """Hold this session's trace and one of the server's `max_concurrent_generations`
    model slots; others wait here with a visible message instead of slowing everyone."""
    slots = _generation_slots()
    with session_lock():
        acquired = slots.acquire(blocking=False)
        if not acquired:
            note = st.info(
                f"The server is busy ({limits().max_concurrent_generations} generations running). "
                "Waiting for a free slot…"
            )
            slots.acquire()
        try:
            if not acquired:
                note.empty()
            yield
        finally:
            slots.release()


@contextmanager
def engine_errors():
    """A serving engine's failure (refused, timeout, HTTP error, short answer) shown as its one sentence. A
    failed request changes nothing, so the run so far stays; the page goes on from here."""
    try:
        yield
    except EngineError as err:
        st.error(str(err), icon="⚠️")


def play(run, step: Callable[[], object], show: Callable[[], None], stop_key: str, stop_help: str) -> None:
    """Step `run` to its end, one step per generation slot so other visitors get turns, `show`ing the text after each.
    A Stop button ends it (its click reruns the page at the next Streamlit call), and so does a serving engine's
    failure (its sentence is shown); what was generated stays."""
    stop_box = st.empty()
    stop_box.button("Stop", key=stop_key, help=stop_help)
    while not run.finished:
        failed = True
        with generation_slot(), engine_errors():
            step()
            failed = False
        if failed:
            break
        show()
    stop_box.empty()


@st.cache_resource
def shared_results() -> dict:
    """Measurements kept for every visitor (a sweep, batching, MoE): measuring once is enough."""
    return {}


def measure_on_click(
    label: str, key: str, result_key: Hashable, measure: Callable, not_yet: str, where=st
) -> object | None:
    """A primary button that runs `measure(progress)` in a generation slot with a progress bar
    (progress is called with done, total, what), then the latest result kept under
    `result_key` for every visitor; or, if nobody has measured yet, the `not_yet` hint and None.
    A Cancel button under the bar ends the run: its click reruns the page, which stops this one at its next
    progress update; nothing is kept, and an earlier result stays."""
    store = shared_results()
    cancel_key = f"{key}_cancel"
    if st.session_state.get(cancel_key):
        st.info("Cancelled: nothing from that run was kept.")
    if where.button(label, key=key, type="primary"):
        bar = st.progress(0.0, text="Starting…")
        cancel = st.empty()
        cancel.button("Cancel", key=cancel_key, help="Stop this measurement; nothing from it is kept")

        def show(done: int, total: int, what: str) -> None:
            bar.progress(done / total, text=f"{what} ({done} of {total})")

        with generation_slot():
            store[result_key] = measure(show)
        bar.empty()
        cancel.empty()
    if result_key not in store:
        st.info(f"{not_yet} The result is kept for everyone.")
    return store.get(result_key)
