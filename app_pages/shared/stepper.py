"""Play: step a run to its end, one generation slot per step, with a Stop button."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app_pages.shared.slots import engine_errors, generation_slot


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
