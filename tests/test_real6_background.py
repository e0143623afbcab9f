"""The background runner of long measurements: one thread per result key for the whole server, progress every
visitor can read, a Cancel honoured at the next progress call, the result kept, a failure kept as one sentence."""

import threading

import pytest

from app_pages.shared.shared_results import BackgroundRuns, SharedResults

pytestmark = pytest.mark.unit


def _gated(steps: int, gate: threading.Event, calls: list):
    """A fake measurement of `steps` steps that waits for `gate` before each one and counts its starts."""

    def measure(progress):
        calls.append(1)
        for i in range(steps):
            gate.wait(5)
            progress(i + 1, steps, f"step {i + 1}")
        return {"steps": steps}

    return measure


def test_a_run_keeps_its_result_for_everyone_and_reports_progress():
    store = SharedResults(8, 10**6)
    runs = BackgroundRuns(store)
    gate, calls = threading.Event(), []
    run = runs.start("k", _gated(3, gate, calls))
    assert run.running and "k" not in store
    gate.set()
    ended = runs.wait("k", timeout=5)
    assert ended.state == "done" and (ended.done, ended.total, ended.what) == (3, 3, "step 3")
    assert ended.fraction == 1.0 and store.get("k") == {"steps": 3}


def test_a_second_press_joins_the_running_run_instead_of_starting_another():
    runs = BackgroundRuns(SharedResults(8, 10**6))
    gate, calls = threading.Event(), []
    first = runs.start("k", _gated(2, gate, calls))
    second = runs.start("k", _gated(2, gate, calls))
    assert second is first
    other = runs.start("other", _gated(1, gate, calls))  # another key is another run
    assert other is not first
    gate.set()
    runs.wait("k", 5), runs.wait("other", 5)
    assert len(calls) == 2


def test_cancel_stops_at_the_next_progress_call_and_keeps_the_earlier_result():
    store = SharedResults(8, 10**6)
    store["k"] = "earlier"
    runs = BackgroundRuns(store)
    gate, calls = threading.Event(), []
    runs.start("k", _gated(50, gate, calls))
    runs.cancel("k")
    gate.set()
    ended = runs.wait("k", timeout=5)
    assert ended.state == "cancelled" and ended.done == 0
    assert store.get("k") == "earlier"
    runs.start("k", _gated(1, gate, calls))  # a new press after a cancel measures again
    assert runs.wait("k", 5).state == "done" and store.get("k") == {"steps": 1} and len(calls) == 2


def test_a_failure_is_one_sentence_and_the_next_press_starts_afresh():
    store = SharedResults(8, 10**6)
    runs = BackgroundRuns(store)

    def broken(progress):
        progress(0, 2, "first")
        raise OSError("llama-server exited with code 1")

    ended = runs.start("k", broken)
    ended = runs.wait("k", 5)
    assert ended.state == "failed" and ended.error == "llama-server exited with code 1"
    assert "k" not in store


def test_a_run_waits_for_a_measurement_slot_and_can_be_cancelled_while_waiting():
    slots = threading.BoundedSemaphore(1)
    slots.acquire()  # another measurement holds the only slot
    runs = BackgroundRuns(SharedResults(8, 10**6))
    calls = []
    run = runs.start("k", _gated(1, threading.Event(), calls), slots)
    assert runs.wait("k", 0.5).running and run.what.startswith("Waiting")
    runs.cancel("k")
    assert runs.wait("k", 5).state == "cancelled" and calls == []
    slots.release()
    gate = threading.Event()
    gate.set()
    runs.start("k", _gated(1, gate, calls), slots)
    assert runs.wait("k", 5).state == "done" and slots.acquire(blocking=False)  # the slot was given back
