"""The background runner of long measurements: one run per key for the whole server, a Cancel honoured at the next
progress call, the result kept (bounded) for everyone, a failure kept as its error, the model slots left free."""

import threading

import pytest

from app_pages.shared.shared_results import MAX_RESULTS, Cancelled, background_runs, keep, shared_results, start

pytestmark = pytest.mark.unit


def _gated(steps: int, gate: threading.Event, calls: list):
    """A measurement of `steps` steps that waits for `gate` before each one and counts its starts."""

    def measure(progress):
        calls.append(1)
        for i in range(steps):
            gate.wait(5)
            progress(i + 1, steps, f"step {i + 1}")
        return {"steps": steps}

    return measure


def _ended(key):
    background_runs()[key].future.exception(timeout=5)  # waits for the end
    return background_runs()[key]


@pytest.fixture
def slots():
    return threading.BoundedSemaphore(2)


def test_a_run_keeps_its_result_for_everyone_and_one_press_joins_another(slots):
    gate, calls = threading.Event(), []
    first = start("run-k", _gated(3, gate, calls), slots)
    assert start("run-k", _gated(3, gate, calls), slots) is first  # a second visitor's press joins the run
    assert not first.future.done() and "run-k" not in shared_results()
    gate.set()
    ended = _ended("run-k")
    assert (ended.done, ended.total, ended.what) == (3, 3, "step 3") and len(calls) == 1
    assert shared_results()["run-k"] == {"steps": 3}


def test_cancel_stops_at_the_next_progress_call_and_a_failure_keeps_the_earlier_result(slots):
    shared_results()["cancel-k"] = "earlier"

    def broken(progress):
        raise OSError("llama-server exited with code 1")

    start("fail-k", broken, slots)  # a failure is kept as its error, and nothing else
    assert (
        str(_ended("fail-k").future.exception()) == "llama-server exited with code 1"
        and "fail-k" not in shared_results()
    )
    gate, calls = threading.Event(), []
    start("cancel-k", _gated(50, gate, calls), slots).cancel.set()
    gate.set()
    ended = _ended("cancel-k")
    assert isinstance(ended.future.exception(), Cancelled) and ended.done == 0
    assert shared_results()["cancel-k"] == "earlier"
    start("cancel-k", _gated(1, gate, calls), slots)  # a new press after a cancel measures again
    assert _ended("cancel-k").future.exception() is None and shared_results()["cancel-k"] == {"steps": 1}


def test_a_run_waits_for_a_measurement_slot_and_can_be_cancelled_while_waiting():
    slots = threading.BoundedSemaphore(1)
    slots.acquire()  # another measurement holds the only slot
    calls = []
    run = start("slot-k", _gated(1, threading.Event(), calls), slots)
    with pytest.raises(TimeoutError):
        run.future.result(timeout=0.5)
    assert run.what.startswith("Waiting")
    run.cancel.set()
    assert isinstance(_ended("slot-k").future.exception(), Cancelled) and calls == []
    slots.release()
    gate = threading.Event()
    gate.set()
    start("slot-k", _gated(1, gate, calls), slots)
    assert _ended("slot-k").future.exception() is None and slots.acquire(blocking=False)  # the slot was given back


def test_results_are_bounded_oldest_out():
    results = {}
    for i in range(MAX_RESULTS + 2):
        keep(results, i, i)
    keep(results, 2, "again")  # measured again: now the newest
    assert len(results) == MAX_RESULTS and 0 not in results and 1 not in results
    assert list(results)[-1] == 2


def test_a_long_measurement_leaves_every_model_slot_to_the_steps(monkeypatch):
    """With one model slot, a measurement in progress used to make every Step wait for its end."""
    from app_pages.shared import models
    from app_pages.shared import slots as server_slots

    monkeypatch.setenv("INFERENCE_LAB_MAX_CONCURRENT_GENERATIONS", "1")
    cached = (models.limits, server_slots.generation_slots, server_slots.measurement_slots)
    for function in cached:
        function.clear()
    try:
        with server_slots.measurement_slot():
            assert server_slots.generation_slots().acquire(timeout=1)  # what a Step's generation_slot takes
            server_slots.generation_slots().release()
    finally:
        for function in cached:
            function.clear()
