"""Measurements kept for every visitor (a sweep, batching, MoE timings), and the button that makes them."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import streamlit as st

from app_pages.shared.slots import generation_slot


@st.cache_resource
def shared_results() -> dict:
    """Measurements kept for every visitor: measuring once is enough."""
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
