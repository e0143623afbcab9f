"""Clicks in a fragment must survive a reconnect to another app process.

A page whose buttons sit in an `st.fragment` sends each click as a rerun of that fragment. When the browser
reconnects to a new session (the app process restarted, or the class proxy moved it to a survivor), the new
session holds no fragment and Streamlit's `AppSession.request_rerun` drops a click on a fragment it does not
know: Step would do nothing. Streamlit's frontend asks for a full rerun on reconnect only when the last run had
a fragment running or an auto-rerun fragment registered (PR #11890). `reconnect_guard` registers one: an empty
fragment with a long `run_every`, so a reconnect always reruns the page and registers its fragments again.
Its auto-rerun costs one empty fragment run an hour."""

from __future__ import annotations

import streamlit as st

GUARD_INTERVAL_S = 3600


@st.fragment(run_every=GUARD_INTERVAL_S)
def reconnect_guard() -> None:
    """Draws nothing; its only job is to be an auto-rerun fragment of this page (see the module docstring)."""
