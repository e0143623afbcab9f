"""Measurements kept for every visitor (a sweep, batching, MoE timings), and the button that makes them.

A result is kept under its key for everyone (the `MAX_RESULTS` latest). With `background`, it is measured in a server
thread, one per key for the whole server: a second visitor's press joins the same run, one fragment polls its bar
while the page stays usable, and Cancel stops it at its next progress call (nothing kept, an earlier result stays)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent import futures
from dataclasses import dataclass, field

import streamlit as st

from app_pages.shared.slots import measurement_slot, measurement_slots
from inference.core.measuring import now
from inference.engines.client import EngineError

MAX_RESULTS = 64  # a classroom server runs for weeks: the oldest result goes first
FINISH_NOTE_SECONDS = 600  # how long a failed or cancelled run is mentioned to visitors
CANCELLED = "Cancelled: nothing from that run was kept."
_STARTING = threading.Lock()


class Cancelled(Exception):
    """Raised inside a measurement at its next progress call once Cancel was pressed."""


@dataclass
class Run:
    future: futures.Future = field(default_factory=futures.Future)
    cancel: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    total: int = 1
    what: str = "Starting…"
    started: float = field(default_factory=now)
    finished: float = 0.0

    def progress(self, done: int, total: int, what: str) -> None:
        if self.cancel.is_set():  # a measurement is never killed mid-request: it stops here
            raise Cancelled
        self.done, self.total, self.what = done, total, what


class Runs(dict):
    def wait_all(self, timeout: float | None = None) -> None:
        futures.wait([run.future for run in list(self.values())], timeout)


@st.cache_resource
def shared_results() -> dict:
    return {}


@st.cache_resource
def background_runs() -> Runs:
    return Runs()


def keep(results: dict, key: Hashable, value: object) -> None:
    results.pop(key, None)
    results[key] = value
    while len(results) > MAX_RESULTS:
        results.pop(next(iter(results)), None)


def _measure(run: Run, measure: Callable, results: dict, key: Hashable, slots: threading.Semaphore) -> None:
    error = None
    try:
        while not slots.acquire(timeout=0.2):  # taken here, so the page never waits for a slot
            run.progress(0, 1, "Waiting for another measurement to finish")
        try:
            run.what = "Starting…"
            keep(results, key, measure(run.progress))
        finally:
            slots.release()
    except Exception as err:  # Cancelled, or a failure the page shows as one sentence
        error = err
    run.finished = now()
    run.future.set_exception(error) if error else run.future.set_result(None)


def start(result_key: Hashable, measure: Callable, slots: threading.Semaphore) -> Run:
    """Start `measure(progress)` in a thread unless a run for `result_key` is going: a second press joins it."""
    runs = background_runs()
    with _STARTING:
        run = runs.get(result_key)
        if run is None or run.future.done():
            run = runs[result_key] = Run()
            args = (run, measure, shared_results(), result_key, slots)
            threading.Thread(target=_measure, args=args, name=f"measure {result_key}", daemon=True).start()
    return run


@st.fragment(run_every=1.0)
def _progress(result_key: Hashable, key: str) -> None:
    """The running measurement's bar and Cancel, redrawn by itself; the page reruns once when it ends."""
    run = background_runs()[result_key]
    if run.future.done():
        st.rerun()
    text = f"{run.what} ({run.done} of {run.total}, {now() - run.started:.0f} s so far)"
    st.progress(min(1.0, run.done / run.total) if run.total else 0.0, text=text)
    if run.cancel.is_set() or st.button("Cancel", key=f"{key}_cancel", help="Stop it for every visitor watching"):
        run.cancel.set()
        st.caption("Cancelling: the run stops at its next step; nothing from it is kept.")
    st.caption("It runs on the server in the background: the rest of the page stays usable, and the result is kept.")


def _failed(error: BaseException | None) -> None:
    if isinstance(error, Cancelled):
        st.info(CANCELLED)
    elif error is not None:
        st.error(f"The measurement failed: {str(error).strip() or type(error).__name__}")


def measure_on_click(
    label: str, key: str, result_key: Hashable, measure: Callable, not_yet: str, where=st, background: bool = False
) -> object | None:
    """A primary button that runs `measure(progress)` (progress(done, total, what)) in a measurement slot; then the
    result kept under `result_key` for every visitor, or the `not_yet` hint and None. With `background`, `measure`
    runs outside the script (it must not call Streamlit); without, in the script, Cancel a click that reruns it."""
    running = False
    if background:
        run = background_runs().get(result_key)
        if where.button(label, key=key, type="primary", disabled=run is not None and not run.future.done()):
            run = start(result_key, measure, measurement_slots())
        running = run is not None and not run.future.done()
        if running:
            _progress(result_key, key)
        elif run is not None and now() - run.finished < FINISH_NOTE_SECONDS:
            _failed(run.future.exception())
    else:
        if st.session_state.get(f"{key}_cancel"):
            st.info(CANCELLED)
        if where.button(label, key=key, type="primary"):
            bar, cancel = st.progress(0.0, text="Starting…"), st.empty()
            cancel.button("Cancel", key=f"{key}_cancel", help="Stop this measurement; nothing from it is kept")
            progress = lambda d, t, w: bar.progress(d / t, text=f"{w} ({d} of {t})")  # noqa: E731
            try:
                with measurement_slot():
                    keep(shared_results(), result_key, measure(progress))
            except (EngineError, RuntimeError, ValueError, OSError) as err:  # one sentence; an earlier result stays
                _failed(err)
            finally:
                bar.empty()
                cancel.empty()
    if result_key not in shared_results() and not running:  # a running bar says what is happening already
        st.info(f"{not_yet} The result is kept for everyone.")
    return shared_results().get(result_key)
