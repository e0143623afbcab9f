"""Measurements kept for every visitor (a sweep, batching, MoE timings), and the button that makes them."""

from __future__ import annotations

import pickle
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import streamlit as st

from app_pages.shared.slots import measurement_slot, measurement_slots
from inference.engines.client import EngineError


class SharedResults:
    """Results kept for everyone, bounded in count and bytes: the least recently used go first, and a key whose
    result was dropped is remembered so the page can say so (a classroom server runs for weeks)."""

    def __init__(self, max_entries: int, max_bytes: int):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._dropped: set[Hashable] = set()
        self._lock = threading.Lock()  # every session's thread reads and writes this one dict

    @staticmethod
    def size_of(value: object) -> int:
        """Bytes a result holds, as pickled (tensors, frames and dataclasses all pickle)."""
        try:
            return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # an unpicklable result: count it as larger than any bound, so it is kept alone
            return sys.maxsize

    def get(self, key: Hashable, default=None):
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key][0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __setitem__(self, key: Hashable, value: object) -> None:
        size = self.size_of(value)
        with self._lock:
            self._items.pop(key, None)
            self._dropped.discard(key)
            self._items[key] = (value, size)
            while len(self._items) > 1 and (
                len(self._items) > self.max_entries or sum(s for _, s in self._items.values()) > self.max_bytes
            ):
                old, _ = self._items.popitem(last=False)
                self._dropped.add(old)

    def was_dropped(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._dropped

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(s for _, s in self._items.values())


class Cancelled(Exception):
    """Raised inside a background measurement at its next progress call once Cancel was pressed."""


@dataclass
class Run:
    """One measurement running in its own thread: its progress, and how it ended. Read by every visitor's page."""

    key: Hashable
    cancel: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    total: int = 1
    what: str = "Starting…"
    started: float = field(default_factory=time.monotonic)
    state: str = "running"  # running, done, failed, cancelled
    error: str = ""
    finished: float | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def fraction(self) -> float:
        return min(1.0, max(0.0, self.done / self.total)) if self.total else 0.0

    def progress(self, done: int, total: int, what: str) -> None:
        """The measurement's progress call; where a Cancel is honoured (a measurement is never killed mid-request)."""
        if self.cancel.is_set():
            raise Cancelled
        self.done, self.total, self.what = done, total, what


class BackgroundRuns:
    """Long measurements in background threads, one per result key for the whole server: a second visitor who
    presses the same button sees the run already going instead of starting another, and the result lands in
    `store` for everyone. The threads never call Streamlit; pages poll `get` (an auto-rerun fragment)."""

    def __init__(self, store: SharedResults):
        self.store = store
        self._runs: dict[Hashable, Run] = {}
        self._threads: dict[Hashable, threading.Thread] = {}
        self._lock = threading.Lock()

    def start(self, key: Hashable, measure: Callable, slots: threading.Semaphore | None = None) -> Run:
        """Start `measure(progress)` for `key` unless a run of it is going, which is returned instead."""
        with self._lock:
            run = self._runs.get(key)
            if run is not None and run.running:
                return run
            run = self._runs[key] = Run(key)
            thread = threading.Thread(target=self._work, args=(run, measure, slots), name=f"measure {key}", daemon=True)
            self._threads[key] = thread
        thread.start()
        return run

    def get(self, key: Hashable) -> Run | None:
        with self._lock:
            return self._runs.get(key)

    def cancel(self, key: Hashable) -> None:
        run = self.get(key)
        if run is not None:
            run.cancel.set()

    def wait(self, key: Hashable, timeout: float | None = None) -> Run | None:
        """Wait for `key`'s run to end (tests, scripts); the run, or None if there is none."""
        with self._lock:
            thread = self._threads.get(key)
        if thread is not None:
            thread.join(timeout)
        return self.get(key)

    def wait_all(self, timeout: float | None = None) -> None:
        """Wait for every run started so far to end (tests, scripts)."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)

    def _work(self, run: Run, measure: Callable, slots: threading.Semaphore | None) -> None:
        try:
            if slots is not None:  # the server's measurement slots, taken here so the page never waits for one
                while not slots.acquire(timeout=0.2):
                    run.progress(0, 1, "Waiting for another measurement to finish")  # a Cancel ends the wait
                run.what = "Starting…"
            try:
                value = measure(run.progress)
            finally:
                if slots is not None:
                    slots.release()
            self.store[run.key] = value
            run.state = "done"
        except Cancelled:
            run.state = "cancelled"
        except Exception as err:  # no page to draw a traceback on: the page shows this sentence
            run.error = str(err).strip() or type(err).__name__
            run.state = "failed"
        finally:
            run.finished = time.monotonic()


MAX_RESULTS = 64
MAX_RESULT_BYTES = 256 * 2**20


@st.cache_resource
def shared_results() -> SharedResults:
    """Measurements kept for every visitor: measuring once is enough."""
    return SharedResults(MAX_RESULTS, MAX_RESULT_BYTES)


@st.cache_resource
def background_runs() -> BackgroundRuns:
    """The server's background measurements, one per result key, writing into `shared_results()`."""
    return BackgroundRuns(shared_results())


POLL_SECONDS = 1.0
FINISH_NOTE_SECONDS = 600  # how long a failed or cancelled run is mentioned to visitors


@st.fragment(run_every=POLL_SECONDS)
def _progress_panel(result_key: Hashable, key: str) -> None:
    """A running measurement's bar and its Cancel, redrawn every second by itself; the rest of the page stays
    usable. When the run ends, the whole page reruns once to draw its result."""
    run = background_runs().get(result_key)
    if run is None or not run.running:
        st.rerun()
    elapsed = time.monotonic() - run.started
    st.progress(run.fraction, text=f"{run.what} ({run.done} of {run.total}, {elapsed:.0f} s so far)")
    if run.cancel.is_set():
        st.caption("Cancelling: the run stops at its next step; nothing from it is kept.")
    elif st.button(
        "Cancel",
        key=f"{key}_cancel",
        help="Stop this measurement (for every visitor watching it); nothing from it is kept, an earlier result stays",
    ):
        run.cancel.set()
        st.caption("Cancelling: the run stops at its next step; nothing from it is kept.")
    st.caption("It runs on the server in the background: the rest of the page stays usable, and the result is kept.")


def _background(label: str, key: str, result_key: Hashable, measure: Callable, where) -> None:
    """The button of a measurement that runs in a background thread, and its progress or how its last run ended."""
    runs = background_runs()
    run = runs.get(result_key)
    if where.button(label, key=key, type="primary", disabled=run is not None and run.running):
        run = runs.start(result_key, measure, measurement_slots())
    if run is not None and run.running:
        _progress_panel(result_key, key)
    elif run is not None and run.finished is not None and time.monotonic() - run.finished < FINISH_NOTE_SECONDS:
        if run.state == "failed":
            st.error(f"The measurement failed: {run.error}")
        elif run.state == "cancelled":
            st.info("Cancelled: nothing from that run was kept.")


def _blocking(label: str, key: str, result_key: Hashable, measure: Callable, where) -> None:
    """The button of a measurement that runs in this script, its bar and Cancel on the page until it ends."""
    cancel_key = f"{key}_cancel"
    if st.session_state.get(cancel_key):
        st.info("Cancelled: nothing from that run was kept.")
    if where.button(label, key=key, type="primary"):
        bar = st.progress(0.0, text="Starting…")
        cancel = st.empty()
        cancel.button("Cancel", key=cancel_key, help="Stop this measurement; nothing from it is kept")

        def show(done: int, total: int, what: str) -> None:
            bar.progress(done / total, text=f"{what} ({done} of {total})")

        try:
            with measurement_slot():
                shared_results()[result_key] = measure(show)
        except (EngineError, RuntimeError, ValueError, OSError) as err:
            # a failed measurement is one sentence and the page goes on; an earlier result stays shown below
            st.error(f"The measurement failed: {str(err).strip() or type(err).__name__}")
        finally:
            bar.empty()
            cancel.empty()


def measure_on_click(
    label: str, key: str, result_key: Hashable, measure: Callable, not_yet: str, where=st, background: bool = False
) -> object | None:
    """A primary button that runs `measure(progress)` in one of the server's measurement slots with a progress bar
    (progress is called with done, total, what), then the latest result kept under
    `result_key` for every visitor; or, if nobody has measured yet, the `not_yet` hint and None.
    Measurements have their own slots, apart from the model slots every Step takes: a sweep of minutes must not
    hold a slot a student's Step waits for.
    A Cancel button under the bar ends the run: its click reruns the page, which stops this one at its next
    progress update; nothing is kept, and an earlier result stays.
    With `background`, the run goes on in a server thread (one per `result_key`, shared by every visitor) while the
    page stays usable; its bar polls every second and the page redraws once with the result. `measure` then runs
    outside the script: it must not call Streamlit (read session state and widgets before)."""
    store = shared_results()
    if background:
        _background(label, key, result_key, measure, where)
        run = background_runs().get(result_key)
        if run is not None and run.running:  # its bar says what is happening: no "press the button" beside it
            return store.get(result_key)
    else:
        _blocking(label, key, result_key, measure, where)
    if result_key not in store:
        if store.was_dropped(result_key):
            st.info(
                f"An earlier result of this measurement was dropped to keep the server's memory bounded (it keeps "
                f"the {MAX_RESULTS} most recently used results, at most {MAX_RESULT_BYTES / 2**20:.0f} MiB). "
                f"{not_yet}"
            )
        else:
            st.info(f"{not_yet} The result is kept for everyone.")
    return store.get(result_key)
