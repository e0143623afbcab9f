"""Values a page keeps in its session between reruns, so a rerun makes only what changed.

Every Streamlit rerun is a hot path: a Step adds one record to a run, and remaking a chip, a table row or a
chart's frames for every earlier record made a Step's cost grow with the run."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import streamlit as st


def kept_until_changed(name: str, key: Hashable, build: Callable[[], object]):
    """`build()`, made once and kept in the session under `name` until `key` changes (compared with ==)."""
    kept = st.session_state.get(name)
    if kept is None or kept[0] != key:
        kept = st.session_state[name] = (key, build())
    return kept[1]


def kept_per_record(name: str, run, make: Callable[[object], object]) -> list:
    """`make(record)` for each of `run.records`, each made once and kept in the session under `name`. A kept item
    is reused only for the very record object it was made from (it holds the record, so its identity cannot be
    reused): Back and Fork replace records, and a new run starts over."""
    kept = st.session_state.get(name)
    if kept is None or kept["run"] is not run:
        kept = st.session_state[name] = {"run": run, "made": []}
    made, records = kept["made"], run.records
    same = 0
    while same < min(len(made), len(records)) and made[same][0] is records[same]:
        same += 1
    del made[same:]
    made.extend((record, make(record)) for record in records[same:])
    return [item for _, item in made]
