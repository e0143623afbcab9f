"""The sampling widgets of every page that sets sampling, drawn from the knob table (`lessons/sampling_lab/knobs.py`):
the classic five, the newer samplers and the stage order (a preset, or a multiselect kept in picking order)."""

from __future__ import annotations

import streamlit as st

from app_pages.shared.layout import presenter
from inference.lessons.sampling_lab.knobs import CLASSIC, MORE, Knob
from inference.sampling.pipeline import ORDER_PRESETS, STAGE_NAMES, TRANSFORMERS_ORDER, SamplingSettings
from inference.sampling.stages import dry_breaker_ids

MIROSTAT_PARAM = "miro"
ORDER_PARAM = "order"
CUSTOM = "custom"
PRESET_PARAMS = {"transformers": "transformers", "llama.cpp default": "llama.cpp"}


def set_defaults(prefix: str, overrides: dict | None = None, knobs: list[Knob] | None = None) -> None:
    overrides = overrides or {}
    for knob in CLASSIC + MORE if knobs is None else knobs:
        st.session_state.setdefault(f"{prefix}_{knob.field}", overrides.get(knob.field, knob.default))
    st.session_state.setdefault(f"{prefix}_mirostat", overrides.get("mirostat", False))
    st.session_state.setdefault(f"{prefix}_order_preset", overrides.get("order_preset", "transformers"))
    st.session_state.setdefault(f"{prefix}_order_custom", list(TRANSFORMERS_ORDER))


def read_url(prefix: str, url_prefix: str, params, knobs: list[Knob] | None = None) -> list[str]:
    """`{url_prefix}{param}` URL values into the widgets, clamped; one sentence per value that cannot be read."""
    problems = []
    for knob in CLASSIC + MORE if knobs is None else knobs:
        name = url_prefix + knob.param
        if name not in params:
            continue
        raw = params[name]
        try:
            value = knob.kind(float(raw)) if knob.kind is int else float(raw)
            if value != value:
                raise ValueError
        except ValueError:
            problems.append(f"`{name}={raw[:30]}` in the link is not a number; using the default.")
            continue
        st.session_state[f"{prefix}_{knob.field}"] = min(max(value, knob.low), knob.high)
    if url_prefix + MIROSTAT_PARAM in params:
        st.session_state[f"{prefix}_mirostat"] = params[url_prefix + MIROSTAT_PARAM] == "1"
    raw_order = params.get(url_prefix + ORDER_PARAM)
    if raw_order:
        presets = {v: k for k, v in PRESET_PARAMS.items()}
        if raw_order in presets:
            st.session_state[f"{prefix}_order_preset"] = presets[raw_order]
        else:
            names = [n for n in raw_order.split(",") if n]
            if all(n in TRANSFORMERS_ORDER for n in names) and len(set(names)) == len(names):
                st.session_state[f"{prefix}_order_preset"] = CUSTOM
                st.session_state[f"{prefix}_order_custom"] = names
            else:
                problems.append(f"`{url_prefix}{ORDER_PARAM}={raw_order[:60]}` is not a stage order; using the preset.")
    return problems


def url_values(
    prefix: str, url_prefix: str, settings: SamplingSettings, knobs: list[Knob] | None = None
) -> dict[str, str]:
    out = {}
    for knob in CLASSIC + MORE if knobs is None else knobs:
        value = getattr(settings, knob.field)
        if value != knob.default:
            out[url_prefix + knob.param] = f"{value:g}"
    if settings.mirostat:
        out[url_prefix + MIROSTAT_PARAM] = "1"
    preset = st.session_state.get(f"{prefix}_order_preset", "transformers")
    if preset == CUSTOM:
        out[url_prefix + ORDER_PARAM] = ",".join(settings.order)
    elif preset != "transformers":
        out[url_prefix + ORDER_PARAM] = PRESET_PARAMS[preset]
    return out


def _slider(where, prefix: str, knob: Knob, help_text: str | None = None) -> None:
    where.slider(
        knob.label,
        knob.kind(knob.low),
        knob.kind(knob.high),
        step=knob.kind(knob.step),
        key=f"{prefix}_{knob.field}",
        persist_state="session",
        help=help_text or knob.help,
    )


def classic_controls(prefix: str, columns: int = 5, cells: list | None = None) -> None:
    if cells is not None:
        for cell, knob in zip(cells, CLASSIC, strict=True):
            _slider(cell, prefix, knob)
        return
    for start in range(0, len(CLASSIC), columns):
        row = st.columns(columns)
        for cell, knob in zip(row, CLASSIC[start : start + columns]):
            _slider(cell, prefix, knob)


def knob_sliders(prefix: str, knobs: list[Knob], cells: list, helps: dict[str, str] | None = None) -> None:
    """One slider per knob in each of `cells`; `helps` (field -> text) replaces a knob's help where a page says more."""
    for cell, knob in zip(cells, knobs, strict=True):
        _slider(cell, prefix, knob, (helps or {}).get(knob.field))


def url_params(prefix: str, knobs: list[Knob]) -> dict[str, tuple[str, type]]:
    return {knob.param: (f"{prefix}_{knob.field}", knob.kind) for knob in knobs}


def ranges(prefix: str, knobs: list[Knob]) -> dict[str, tuple]:
    return {f"{prefix}_{knob.field}": (knob.kind(knob.low), knob.kind(knob.high)) for knob in knobs}


def more_controls(prefix: str, columns: int = 3, inline: bool = False) -> None:
    """The newer samplers and the order in an expander (two a row in presenter mode; `inline`: under a heading, in
    a page's own expander). Closed, its widgets do not run (a fifth of a Step's script time); their values live on
    in the session. It opens by itself on values away from the defaults, so nothing acting on the draw is hidden."""
    columns = min(columns, 2) if presenter() else columns
    if inline:
        st.markdown(f"**{MORE_LABEL}**")
        more = st.container()
    else:
        more = st.expander(MORE_LABEL, expanded=_more_in_use(prefix), key=f"{prefix}_more_open", on_change="rerun")
        if not more.open:
            return
    with more:
        for start in range(0, len(MORE), columns):
            row = st.columns(columns)
            for cell, knob in zip(row, MORE[start : start + columns]):
                _slider(cell, prefix, knob)
        st.checkbox(
            "Mirostat v2 (a running cut on surprise; set τ and η above)",
            key=f"{prefix}_mirostat",
            persist_state="session",
        )
        order_control(prefix)


MORE_LABEL = "More samplers (typical-p, top-nσ, XTC, DRY, mirostat) and the stage order"


def _more_in_use(prefix: str) -> bool:
    state = st.session_state
    return (
        any(state.get(f"{prefix}_{knob.field}", knob.default) != knob.default for knob in MORE)
        or bool(state.get(f"{prefix}_mirostat", False))
        or state.get(f"{prefix}_order_preset", "transformers") != "transformers"
    )


def order_control(prefix: str) -> None:
    choices = list(ORDER_PRESETS) + [CUSTOM]
    preset = st.radio(
        "Stage order",
        choices,
        key=f"{prefix}_order_preset",
        persist_state="session",
        horizontal=True,
        help="transformers: penalty → temperature → top-k → top-p → min-p → typical-p. llama.cpp's "
        "default chain: penalties → DRY → top-nσ → top-k → typical-p → top-p → min-p → XTC → "
        "temperature (last).",
    )
    if preset == CUSTOM:
        st.multiselect(
            "Your order (stages run left to right; remove a stage and add it back to move it to the end; "
            "stages left out run after these)",
            list(TRANSFORMERS_ORDER),
            key=f"{prefix}_order_custom",
            persist_state="session",
            format_func=lambda n: STAGE_NAMES[n],
        )
    order = current_order(prefix)
    st.caption("Runs as: " + " → ".join(STAGE_NAMES[n] for n in order))


def current_order(prefix: str) -> tuple[str, ...]:
    preset = st.session_state.get(f"{prefix}_order_preset", "transformers")
    if preset == CUSTOM:
        return SamplingSettings(order=tuple(st.session_state.get(f"{prefix}_order_custom", ()))).order
    return ORDER_PRESETS[preset]


def settings_from_state(prefix: str, **fixed) -> SamplingSettings:
    values = {
        knob.field: knob.kind(st.session_state.get(f"{prefix}_{knob.field}", knob.default)) for knob in CLASSIC + MORE
    }
    values["mirostat"] = bool(st.session_state.get(f"{prefix}_mirostat", False))
    values["order"] = current_order(prefix)
    values.update(fixed)
    return SamplingSettings(**values)


@st.cache_resource(max_entries=8, show_spinner=False)
def breaker_ids(model_name: str, breakers: tuple[str, ...], _tokenizer) -> frozenset[int]:
    """DRY's breakers as token ids for this model's tokenizer, once per server."""
    return dry_breaker_ids(_tokenizer, breakers)
