"""Measurements kept for every visitor (a sweep, batching, MoE timings), and the button that makes them."""

from __future__ import annotations

import pickle
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import streamlit as st

from app_pages.shared.slots import measurement_slot
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


MAX_RESULTS = 64
MAX_RESULT_BYTES = 256 * 2**20


@st.cache_resource
def shared_results() -> SharedResults:
    """Measurements kept for every visitor: measuring once is enough."""
    return SharedResults(MAX_RESULTS, MAX_RESULT_BYTES)


def measure_on_click(
    label: str, key: str, result_key: Hashable, measure: Callable, not_yet: str, where=st
) -> object | None:
    """A primary button that runs `measure(progress)` in one of the server's measurement slots with a progress bar
    (progress is called with done, total, what), then the latest result kept under
    `result_key` for every visitor; or, if nobody has measured yet, the `not_yet` hint and None.
    Measurements have their own slots, apart from the model slots every Step takes: a sweep of minutes must not
    hold a slot a student's Step waits for.
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

        try:
            with measurement_slot():
                store[result_key] = measure(show)
        except (EngineError, RuntimeError, ValueError, OSError) as err:
            # a failed measurement is one sentence and the page goes on; an earlier result stays shown below
            st.error(f"The measurement failed: {str(err).strip() or type(err).__name__}")
        finally:
            bar.empty()
            cancel.empty()
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
