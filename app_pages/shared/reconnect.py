"""Clicks in a fragment must survive a reconnect to another app process: a new session knows no fragment and drops
its click, and Streamlit's frontend reruns the page on reconnect only when an auto-rerun fragment is registered
(PR #11890). This empty one, rerun once an hour, is that fragment."""

import streamlit as st


@st.fragment(run_every=3600)
def reconnect_guard() -> None:
    pass
