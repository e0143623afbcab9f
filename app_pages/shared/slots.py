"""The server's model slots and each visitor's run lock, and a serving engine's failure shown as a sentence."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import streamlit as st

from app_pages.shared.models import limits
from inference.engines.client import EngineError


@st.cache_resource
def generation_slots() -> threading.BoundedSemaphore:
    """The server's `max_concurrent_generations` model slots, one semaphore for every session."""
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
    with generation_slots():
        yield


@st.cache_resource
def measurement_slots() -> threading.BoundedSemaphore:
    """The server's `max_concurrent_measurements` slots for long measurements (sweeps, replays), apart from the
    model slots: a measurement of minutes never holds a slot a Step waits for."""
    return threading.BoundedSemaphore(limits().max_concurrent_measurements)


def _take(slots: threading.BoundedSemaphore, busy: str) -> None:
    """Take one of `slots`; while none is free, `busy` is shown, and it goes once one is. Clearing it is a
    Streamlit call, which a rerun can interrupt: the slot is given back then, never kept by a stopped script."""
    if slots.acquire(blocking=False):
        return
    note = st.info(busy)
    slots.acquire()
    try:
        note.empty()
    except BaseException:
        slots.release()
        raise


@contextmanager
def measurement_slot():
    """One of the measurement slots; others wait here with a visible message."""
    slots = measurement_slots()
    _take(
        slots,
        f"Another visitor's measurement is running ({limits().max_concurrent_measurements} at a time). "
        "Waiting for it to finish…",
    )
    try:
        yield
    finally:
        slots.release()


@contextmanager
def generation_slot():
    """Hold this session's trace and one of the server's `max_concurrent_generations`
    model slots; others wait here with a visible message instead of slowing everyone."""
    slots = generation_slots()
    with session_lock():
        _take(
            slots,
            f"The server is busy ({limits().max_concurrent_generations} generations running). Waiting for a free slot…",
        )
        try:
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
