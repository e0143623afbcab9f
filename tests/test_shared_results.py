"""Results kept for everyone are bounded (count and bytes, least recently used out) and say when one was
dropped; a long measurement no longer holds a model slot a Step waits for."""

import threading
import time

import pytest

from app_pages.shared.shared_results import SharedResults

pytestmark = pytest.mark.unit


def test_results_are_bounded_in_count_least_recently_used_out():
    store = SharedResults(max_entries=3, max_bytes=10**9)
    for key in "abc":
        store[key] = key * 10
    assert store.get("a") == "a" * 10  # a is now the most recently used
    store["d"] = "d"
    assert "b" not in store and store.was_dropped("b")
    assert [k for k in "acd" if k in store] == ["a", "c", "d"]
    store["b"] = "again"  # measured again: no longer "dropped"
    assert not store.was_dropped("b") and store.get("b") == "again"


def test_results_are_bounded_in_bytes():
    store = SharedResults(max_entries=100, max_bytes=50_000)
    store["big"] = bytes(40_000)
    store["other"] = bytes(20_000)  # together over the bound: the older goes
    assert "big" not in store and store.was_dropped("big")
    assert store.bytes <= 50_000
    store["huge"] = bytes(80_000)  # a single result over the bound is still kept, alone
    assert "huge" in store and len(store) == 1


def test_an_unpicklable_result_is_kept_alone_and_goes_first():
    """Its size cannot be measured: it counts as larger than the bound (it used to count as 0 bytes, unbounded)."""
    store = SharedResults(max_entries=100, max_bytes=50_000)
    store["small"] = bytes(10)
    store["lock"] = threading.Lock()  # locks do not pickle
    assert "lock" in store and "small" not in store and store.was_dropped("small")
    store["next"] = bytes(10)
    assert "lock" not in store and "next" in store


def test_threads_writing_at_once_keep_the_bound():
    store = SharedResults(max_entries=8, max_bytes=10**9)
    threads = [threading.Thread(target=lambda i=i: [store.__setitem__((i, j), j) for j in range(50)]) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store) == 8


def test_a_long_measurement_leaves_every_model_slot_to_the_steps(monkeypatch):
    """With one model slot, a measurement in progress used to make every Step wait for its end."""
    from app_pages.shared import models, slots

    monkeypatch.setenv("INFERENCE_LAB_MAX_CONCURRENT_GENERATIONS", "1")
    for cached in (models.limits, slots.generation_slots, slots.measurement_slots):
        cached.clear()
    try:
        measuring = threading.Event()
        finished = threading.Event()

        def measure():
            with slots.measurement_slot():
                measuring.set()
                time.sleep(3)
            finished.set()

        thread = threading.Thread(target=measure)
        thread.start()
        measuring.wait(10)
        got_slot = slots.generation_slots().acquire(timeout=1)  # what a Step's generation_slot takes
        assert got_slot and not finished.is_set()
        slots.generation_slots().release()
        thread.join()
    finally:
        for cached in (models.limits, slots.generation_slots, slots.measurement_slots):
            cached.clear()
