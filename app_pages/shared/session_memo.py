"""Values a page keeps in its session between reruns, so a Step remakes only what changed (not every earlier
record's chip, row or frame)."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import streamlit as st


def kept_until_changed(name: str, key: Hashable, build: Callable[[], object]):
    """`build()`, kept in the session under `name` until `key` changes."""
    kept = st.session_state.get(name)
    if kept is None or kept[0] != key:
        kept = st.session_state[name] = (key, build())
    return kept[1]


def kept_per_record(name: str, run, make: Callable[[object], object]) -> list:
    """`make(record)` for each of `run.records`, kept per record object (Back and Fork replace records)."""
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
