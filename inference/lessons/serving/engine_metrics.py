"""The engine's own view while a trace runs: requests running and waiting, and the KV cache they hold.

Read from the engine itself, not inferred from the client's timestamps:
- llama.cpp's `llama-server`: `/slots` gives each slot's `is_processing` and `n_prompt_tokens` (the tokens in
  that slot's cache: the prompt so far plus the tokens generated, which the server appends to it);
  `/metrics` (started with `--metrics`) gives `llamacpp:requests_deferred`, requests waiting for a free slot.
- vLLM: `/metrics` gives `vllm:num_requests_running`, `vllm:num_requests_waiting` and the KV cache's used
  fraction (`vllm:kv_cache_usage_perc`, `vllm:gpu_cache_usage_perc` in older versions).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

import pandas as pd

from inference.engines.client import LLAMACPP, EngineClient, EngineError


@dataclass(frozen=True)
class EngineSample:
    t_s: float  # when the answer came back, seconds from the trace's start
    running: int | None
    waiting: int | None
    kv_tokens: int | None  # tokens held in the KV cache by running requests (llama.cpp)
    kv_used: float | None  # fraction of the KV cache in use (vLLM)


def _metric(metrics: dict[str, float], name: str) -> float | None:
    """A Prometheus value by name, summed over its label sets (vLLM labels every metric with the model)."""
    values = [v for key, v in metrics.items() if key == name or key.startswith(name + "{")]
    return sum(values) if values else None


def read_state(client: EngineClient, t_s: float) -> EngineSample:
    """One sample of the engine's state; raises EngineError when the engine does not answer."""
    if client.dialect == LLAMACPP:
        slots = client.slots()
        busy = [s for s in slots if s.get("is_processing")]
        kv_tokens = sum(int(s.get("n_prompt_tokens") or 0) for s in busy)
        try:
            waiting = _metric(client.metrics(), "llamacpp:requests_deferred")
        except EngineError:  # started without --metrics: running and the cache are still known
            waiting = None
        return EngineSample(t_s, len(busy), None if waiting is None else int(waiting), kv_tokens, None)
    metrics = client.metrics()
    running = _metric(metrics, "vllm:num_requests_running")
    waiting = _metric(metrics, "vllm:num_requests_waiting")
    used = _metric(metrics, "vllm:kv_cache_usage_perc")
    used = _metric(metrics, "vllm:gpu_cache_usage_perc") if used is None else used
    return EngineSample(
        t_s, None if running is None else int(running), None if waiting is None else int(waiting), None, used
    )


class StatePoller:
    """Reads the engine's state every `interval_s` on its own thread and connection until `stop()`."""

    def __init__(self, url: str, dialect: str, started: float, interval_s: float = 0.1):
        self.url, self.dialect, self.started, self.interval_s = url, dialect, started, interval_s
        self.samples: list[EngineSample] = []
        self.error: str | None = None
        self.answered = threading.Event()  # set after the first read, answered or not: its connection is warm
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-state", daemon=True)

    def start(self) -> StatePoller:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with EngineClient(self.url, dialect=self.dialect, timeout=5.0) as client:
                while not self._stop.is_set():
                    try:
                        self.samples.append(read_state(client, time.perf_counter()))  # re-based in stop()
                    except EngineError as err:
                        self.error = str(err)  # keep polling: one slow answer under load is not the end
                    self.answered.set()
                    self._stop.wait(self.interval_s)
        except Exception as err:  # noqa: BLE001 - a poller failure must never break the replay
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.answered.set()

    def stop(self) -> pd.DataFrame:
        self._stop.set()
        self._thread.join(timeout=10)
        # times from `started` (which the replay may set after the poller's first read), without reads before it
        rebased = [dataclasses.replace(s, t_s=s.t_s - self.started) for s in self.samples]
        return samples_table([s for s in rebased if s.t_s >= 0])


def samples_table(samples: list[EngineSample]) -> pd.DataFrame:
    return pd.DataFrame([s.__dict__ for s in samples], columns=["t_s", "running", "waiting", "kv_tokens", "kv_used"])
