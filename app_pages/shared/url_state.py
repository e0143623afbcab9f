"""Settings read from a shared link, once per session: a link reopens a page as it was copied."""

from __future__ import annotations

from collections.abc import Collection

import streamlit as st


def read_url_once(
    flag: str,
    url_params: dict[str, tuple[str, type]],
    defaults: dict[str, object],
    ranges: dict[str, tuple],
    names: dict[str, str] | None = None,
    choices: dict[str, tuple[Collection, str]] | None = None,
) -> list[str]:
    """Every run, unset widget keys get their `defaults`; a session's first run (`flag` unset) puts each URL
    parameter (`param -> (widget key, type)`) into its widget, clamped to `ranges` (`names`: what it sets), unless it
    cannot be read or `choices` (key -> (allowed, rest of the sentence)) refuses it. One sentence per problem."""
    for key, value in defaults.items():  # a widget whose key was dropped gets its default, not its minimum
        st.session_state.setdefault(key, value)
    if st.session_state.get(flag):
        return []
    st.session_state[flag] = True
    problems = []
    for param, (key, kind) in url_params.items():
        if param not in st.query_params:
            continue
        raw = st.query_params[param]
        try:
            value = kind(raw)
            if value != value:  # nan
                raise ValueError
        except ValueError:
            problems.append(f"`{param}={raw[:30]}` in the link is not a {kind.__name__}; using the default.")
            continue
        if choices and key in choices and value not in choices[key][0]:
            problems.append(f"`{param}={raw[:30]}` {choices[key][1]}")
            continue
        if key in ranges and not ranges[key][0] <= value <= ranges[key][1]:
            low, high = ranges[key]
            clamped = min(max(value, low), high)
            named = f" for {names[key]}" if names and key in names else ""
            problems.append(f"`{param}={raw}` is outside {low}–{high}{named}; clamped to {clamped}.")
            value = clamped
        st.session_state[key] = value
    return problems


def read_url_index(param: str, key: str, upper: int, what: str) -> list[str]:
    """Once per session: an index (a layer, an expert) from the URL, clamped to 0..upper (known once the model is)."""
    flag = f"{key}_url_read"
    if st.session_state.get(flag) or param not in st.query_params:
        return []
    st.session_state[flag] = True
    raw = st.query_params[param]
    try:
        value = int(raw)
    except ValueError:
        return [f"`{param}={raw[:20]}` in the link is not a whole number; showing {what} 0."]
    st.session_state[key] = clamped = min(max(value, 0), upper)
    return (
        []
        if clamped == value
        else [f"`{param}={value}` is outside {what}s 0–{upper} of this model; showing {what} {clamped}."]
    )
