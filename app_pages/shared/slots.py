"""The server's model slots and each visitor's run lock, and a serving engine's failure shown as a sentence."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import streamlit as st

from app_pages.shared.models import limits
from inference.engines.client import EngineError


@st.cache_resource
def generation_slots() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(limits().max_concurrent_generations)


@st.cache_resource
def measurement_slots() -> threading.BoundedSemaphore:
    """Slots for long measurements, apart from the model slots: a measurement never holds a slot a Step waits for."""
    return threading.BoundedSemaphore(limits().max_concurrent_measurements)


def session_lock() -> threading.RLock:
    """One visitor's runs take turns on their trace (a click during a run starts the next before the old one stops)."""
    return st.session_state.setdefault("_trace_lock", threading.RLock())


def model_slot():
    """A model slot, waited for silently: for a `st.cache_data` function (a message there would replay on hits)."""
    return generation_slots()


@contextmanager
def _slot(slots: threading.BoundedSemaphore, busy: str):
    """One of `slots`; `busy` shown while none is free. Clearing it is a Streamlit call a rerun can interrupt: the
    slot is given back then, never kept by a stopped script."""
    if not slots.acquire(blocking=False):
        note = st.info(busy)
        slots.acquire()
        try:
            note.empty()
        except BaseException:
            slots.release()
            raise
    try:
        yield
    finally:
        slots.release()


def measurement_slot():
    n = limits().max_concurrent_measurements
    return _slot(
        measurement_slots(), f"Another visitor's measurement is running ({n} at a time). Waiting for it to finish…"
    )


@contextmanager
def generation_slot():
    """This session's trace and one of the server's model slots; others wait with a visible message."""
    with (
        session_lock(),
        _slot(
            generation_slots(),
            f"The server is busy ({limits().max_concurrent_generations} generations running). Waiting for a free slot…",
        ),
    ):
        yield


@contextmanager
def engine_errors():
    """A serving engine's failure as its one sentence; the run so far stays."""
    try:
        yield
    except EngineError as err:
        st.error(str(err), icon="⚠️")
