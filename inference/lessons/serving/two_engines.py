"""One seeded trace on llama.cpp's `llama-server` and on vLLM, both started here for the same float32 model and the
same batch limit (`--parallel N`, `--max-num-seqs N`), side by side, and what each scheduler did, from its own
`/metrics` before and after: llama.cpp's N fixed slots over a KV cache reserved at start (`n_decode_total` passes,
`requests_deferred`); vLLM's continuous batching over a KV cache paged in blocks handed out as requests grow
(`iteration_tokens_total`, `cache_config_info`, `kv_cache_usage_perc`, `num_preemptions_total`).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import pandas as pd

from inference.core.measuring import Progress
from inference.engines import llamacpp, vllm
from inference.engines.client import LLAMACPP, VLLM, EngineClient
from inference.lessons.serving.models import ModelOnEngine
from inference.lessons.serving.replay import EngineTarget, ReplayResult, metric_total, replay, scaled
from inference.lessons.serving.request_trace import Trace

ENGINES = (LLAMACPP, VLLM)
_LABELS = re.compile(r'(\w+)="([^"]*)"')
FACT_NAMES = {
    "batching": "How requests are batched",
    "cores": "Compute on (from the engine's log)",
    "kv_cache": "KV cache",
    "forward_passes": "Forward passes (engine steps) during the replay",
    "generated_per_pass": "Generated tokens per pass (mean: requests decoding together)",
    "tokens_per_pass": "All tokens per pass (prompt and generated)",
    "peak_waiting": "Most requests waiting at once",
    "peak_kv_tokens": "Most KV cache held at once (tokens; vLLM: whole blocks)",
    "preemptions": "Requests preempted (KV blocks ran out)",
}


def available() -> dict[str, str]:
    """{engine: why it cannot run here} for the engines that are missing."""
    missing = {}
    if not llamacpp.is_built():
        missing[LLAMACPP] = "llama-server is not built: `python -m inference.engines llamacpp build` (~5 min)."
    if not vllm.is_installed():
        missing[VLLM] = "vLLM is not installed: `python -m inference.engines vllm install` (~7 min, 3.5 GB)."
    return missing


@dataclass
class EngineRun:
    """One engine's replay, its `/metrics` before and after, and the cores its log reported (a server started here)."""

    engine: str
    result: ReplayResult
    before: dict[str, float]
    after: dict[str, float]
    batch_limit: int
    context: int | None  # tokens per sequence the engine was started for
    cores: str | None = None

    def delta(self, name: str) -> float | None:
        before, after = metric_total(self.before, name), metric_total(self.after, name)
        return None if before is None or after is None else after - before

    def blocks(self) -> tuple[int, int]:
        """vLLM's (block size in tokens, number of blocks) from its cache_config_info; 0 where it reports none."""
        key = next((k for k in self.after if k.partition("{")[0] == "vllm:cache_config_info"), "")
        info = dict(_LABELS.findall(key.partition("{")[2]))
        return int(info.get("block_size") or 0), int(info.get("num_gpu_blocks") or 0)


def _cores(log_path, engine: str) -> str | None:
    """From the engine's start-up log: llama-server's `n_threads = N`, vLLM worker's `core ids=[...]`."""
    pattern, said = (
        (r"n_threads = (\d+)", "{} threads") if engine == LLAMACPP else (r"core ids=\[([^\]]*)\]", "core(s) {}")
    )
    found = log_path.is_file() and re.search(pattern, log_path.read_text(errors="replace"))
    return said.format(found.group(1)) if found else None


def replay_on(
    engine: str,
    model: ModelOnEngine,
    trace: Trace,
    slots: int,
    progress: Progress | None = None,
    url: str | None = None,
) -> EngineRun:
    """Start `engine` for `model` allowing `slots` requests per batch, warm it up, replay `trace`, stop it; with
    `url`, replay on that server instead (started elsewhere for the same model: the tests share one vLLM)."""
    with contextlib.ExitStack() as stack:
        server = None
        if url is None:
            if engine == VLLM and progress is not None:
                progress(0, len(trace.requests), "starting vLLM: it loads its engine before it serves")
            start = llamacpp.serve(model.gguf, parallel=slots) if engine == LLAMACPP else None
            server = stack.enter_context(start or vllm.serve(model.safetensors.parent, max_num_seqs=slots))
            url = server.url
        client = stack.enter_context(EngineClient(url, dialect=engine))
        served = client.served_model()  # vLLM answers only to the name it serves under
        client.complete([0, 1, 2, 3], 4)  # warm-up: a new server's first pass sets up its buffers
        before = client.metrics()
        target = EngineTarget(url, engine, served.name if engine == VLLM else model.label, slots)
        result = replay(trace, target, progress=progress)
        run = EngineRun(engine, result, before, client.metrics(), slots, served.context)
    run.cores = None if server is None else _cores(server.log_path, engine)
    return run


def replay_on_engines(
    model: ModelOnEngine, trace: Trace, slots: int, engines=ENGINES, progress=None, running: dict | None = None
) -> dict[str, EngineRun]:
    """The same trace on each engine in turn (never at once: they would share the CPU); `running`: {engine: url}."""
    n = len(trace.requests)
    return {
        e: replay_on(e, model, trace, slots, scaled(progress, i * n, n, len(engines) * n), (running or {}).get(e))
        for i, e in enumerate(engines)
    }


def _peak(states: pd.DataFrame, column: str) -> float | None:
    return states[column].max() if states[column].notna().any() else None


def _per_pass(tokens: float | None, passes: float | None) -> float | None:
    return tokens / passes if passes and tokens is not None else None


def scheduler_facts(run: EngineRun) -> dict[str, object]:
    """What the scheduler did during the replay (FACT_NAMES), from its own metrics' deltas and the state polled
    every 0.1 s; None where the engine reports no figure."""
    states = run.result.engine_states
    block, blocks = run.blocks()
    if run.engine == LLAMACPP:
        passes = run.delta("llamacpp:n_decode_total")
        generated, prompt = run.delta("llamacpp:tokens_predicted_total"), run.delta("llamacpp:prompt_tokens_total")
        all_tokens = generated + prompt if generated is not None and prompt is not None else None
        cells = run.context * run.batch_limit if run.context else None  # llamacpp.serve: -c = slots x context
        batching = f"{run.batch_limit} fixed slots (--parallel)"
        kv_cache = f"{cells:,} token cells reserved at start" if cells else "reserved at start"
        peak_kv, preemptions = _peak(states, "kv_tokens"), None
    else:
        passes = run.delta("vllm:iteration_tokens_total_count")  # the histogram's count: engine steps
        generated, all_tokens = run.delta("vllm:generation_tokens_total"), run.delta("vllm:iteration_tokens_total_sum")
        batching = f"continuous, up to {run.batch_limit} sequences (--max-num-seqs)"
        kv_cache = f"{blocks:,} blocks of {block} tokens, handed out as requests grow" if blocks else "paged"
        used = _peak(states, "kv_used")
        peak_kv = round(used * blocks) * block if used is not None and blocks else None  # whole blocks
        preemptions = run.delta("vllm:num_preemptions_total")
    return {
        "cores": run.cores,
        "batching": batching,
        "kv_cache": kv_cache,
        "forward_passes": passes,
        "generated_per_pass": _per_pass(generated, passes),
        "tokens_per_pass": _per_pass(all_tokens, passes),
        "peak_waiting": _peak(states, "waiting"),
        "peak_kv_tokens": peak_kv,
        "preemptions": preemptions,
        "block_size": block or None,  # not a table row: for the verdict
    }


def _format(value) -> str:
    if value is None:
        return "not reported"
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:,.2f}"


def scheduler_table(runs: dict[str, EngineRun]) -> pd.DataFrame:
    """A row per fact, a column per engine, numbers formatted."""
    columns = {e: [_format(scheduler_facts(run)[key]) for key in FACT_NAMES] for e, run in runs.items()}
    return pd.DataFrame(columns, index=list(FACT_NAMES.values()))


def states_in_tokens(run: EngineRun) -> pd.DataFrame:
    """The polled state with vLLM's used fraction of its KV blocks in tokens, so both engines' curves share a unit."""
    states = run.result.engine_states.copy()
    block, blocks = run.blocks()
    if run.engine == VLLM and blocks and states["kv_used"].notna().any():
        states["kv_tokens"] = (states["kv_used"] * blocks).round() * block
    return states
