"""One seeded trace on llama.cpp's `llama-server` and on vLLM, side by side, and what each scheduler did.

Both engines are started here for the same model folder (llama-server on its float32 GGUF, vLLM on the
safetensors in float32), both allowed the same number of requests in one batch (`--parallel N` slots,
`--max-num-seqs N`), both warmed up with one short request, then sent the same requests at the same arrival
times (`replay.replay`). Their schedulers differ, and each engine's own `/metrics`, read before and after the
replay, says how:
- llama.cpp: N fixed slots over one KV cache of N x context token cells, reserved at start (`-kvu`, unified:
  any slot may use any cell); a request waits for a free slot (`llamacpp:requests_deferred`); each
  `llama_decode` call is one forward pass (`llamacpp:n_decode_total`).
- vLLM: continuous batching: each engine step admits waiting requests while the batch has room and KV blocks
  are free; the KV cache is paged in blocks of `block_size` tokens handed to a request as it grows
  (`vllm:cache_config_info`, `vllm:kv_cache_usage_perc`), and a request is preempted when blocks run out
  (`vllm:num_preemptions_total`); `vllm:iteration_tokens_total` is a histogram of tokens per engine step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from inference.core.measuring import Progress
from inference.engines import llamacpp, vllm
from inference.engines.client import LLAMACPP, VLLM, EngineClient
from inference.lessons.serving.experiments import WARM_UP, ModelOnEngine, _scaled
from inference.lessons.serving.replay import EngineTarget, ReplayResult, replay, solo_run
from inference.lessons.serving.request_trace import Trace
from inference.lessons.serving.stats import SLO

ENGINES = (LLAMACPP, VLLM)
_LABELS = re.compile(r'(\w+)="([^"]*)"')


def available() -> dict[str, str]:
    """{engine: why it cannot run here} for the engines that are missing (empty when both can run)."""
    missing = {}
    if not llamacpp.is_built():
        missing[LLAMACPP] = "llama-server is not built: `python -m inference.engines llamacpp build` (~5 min)."
    if not vllm.is_installed():
        missing[VLLM] = "vLLM is not installed: `python -m inference.engines vllm install` (~7 min, 3.5 GB)."
    return missing


@dataclass
class EngineRun:
    """One engine's replay of the trace, its `/metrics` before and after, how long it took to start (0 for a
    server started elsewhere) and the cores its log reported."""

    engine: str
    result: ReplayResult
    before: dict[str, float]
    after: dict[str, float]
    started_s: float
    batch_limit: int
    context: int | None  # tokens per sequence the engine was started for
    cores: str | None = None  # the CPU cores or threads the engine's log says its compute ran on


def _total(metrics: dict[str, float], name: str) -> float | None:
    values = [v for key, v in metrics.items() if key.partition("{")[0] == name]
    return sum(values) if values else None


def _delta(run: EngineRun, name: str) -> float | None:
    before, after = _total(run.before, name), _total(run.after, name)
    return None if before is None or after is None else after - before


def _labels(metrics: dict[str, float], name: str) -> dict[str, str]:
    """The labels of an info metric (value 1, the facts in its labels), e.g. vLLM's cache_config_info."""
    for key in metrics:
        if key.partition("{")[0] == name:
            return dict(_LABELS.findall(key.partition("{")[2]))
    return {}


def _replay(url: str, engine: str, label: str, trace: Trace, slots: int, progress) -> EngineRun:
    """Warm up, read /metrics, replay, read /metrics again (context and start-up facts are filled in by the caller)."""
    with EngineClient(url, dialect=engine) as client:
        served = client.served_model()  # vLLM answers only to the name it serves under
        target = EngineTarget(url, engine, served.name if engine == VLLM else label, slots)
        solo_run(target, WARM_UP)
        before = client.metrics()
        result = replay(trace, target, progress=progress)
        after = client.metrics()
    return EngineRun(engine, result, before, after, 0.0, slots, served.context)


def _cores(log_path, engine: str) -> str | None:
    """From the engine's own start-up log: llama-server's `n_threads = N`, vLLM worker's `core ids=[...]`."""
    try:
        log = log_path.read_text(errors="replace")
    except OSError:
        return None
    if engine == LLAMACPP:
        found = re.search(r"n_threads = (\d+)", log)
        return f"{found.group(1)} threads" if found else None
    found = re.search(r"core ids=\[([^\]]*)\]", log)
    return f"core(s) {found.group(1)}" if found else None


def replay_on(
    engine: str,
    model: ModelOnEngine,
    trace: Trace,
    slots: int,
    progress: Progress | None = None,
    running_url: str | None = None,
) -> EngineRun:
    """Start `engine` for `model` allowing `slots` requests per batch, replay `trace`, stop it. With `running_url`,
    replay on that server instead (started elsewhere for the same model with `slots`: the tests share one vLLM)."""
    if running_url:
        return _replay(running_url, engine, model.label, trace, slots, progress)
    if engine == LLAMACPP:
        server = llamacpp.serve(model.gguf, parallel=slots)
    else:
        if progress is not None:
            progress(0, len(trace.requests), "starting vLLM: it loads its engine before it serves")
        server = vllm.serve(model.safetensors.parent, max_num_seqs=slots)
    with server:
        run = _replay(server.url, engine, model.label, trace, slots, progress)
    run.started_s, run.cores = server.started_s, _cores(server.log_path, engine)
    return run


def replay_on_engines(
    model: ModelOnEngine,
    trace: Trace,
    slots: int,
    engines=ENGINES,
    progress: Progress | None = None,
    running: dict[str, str] | None = None,
) -> dict[str, EngineRun]:
    """The same trace on each engine in turn (never at once: they would share the CPU); `running` maps an engine
    to a server already running (see `replay_on`)."""
    n, total = len(trace.requests), len(engines) * len(trace.requests)
    return {
        e: replay_on(e, model, trace, slots, _scaled(progress, i * n, n, total), (running or {}).get(e))
        for i, e in enumerate(engines)
    }


def side_by_side(runs: dict[str, EngineRun], slo: SLO = SLO()) -> pd.DataFrame:
    """A row per engine: throughput and the TTFT / time-per-output-token / end-to-end percentiles (ms)."""
    rows = []
    for engine, run in runs.items():
        s = run.result.summary(slo)
        rows.append(
            {
                "engine": engine,
                "completed": f"{s.completed} of {s.requests}",
                "throughput_tokens_per_s": s.throughput_tokens_per_s,
                **s.percentiles_ms(ttft=(50, 95), tpot=(50, 95), e2e=(95,)),
                "good_requests": s.good_requests,
                "started_s": run.started_s,
            }
        )
    return pd.DataFrame(rows)


def _peak(states: pd.DataFrame, column: str) -> float | None:
    """The largest polled value of `column`; None when the engine never reported it."""
    return states[column].max() if len(states) and states[column].notna().any() else None


def _per_pass(tokens: float | None, passes: float | None) -> float | None:
    """Tokens per forward pass; None when either count is missing or there was no pass."""
    return tokens / passes if passes and tokens is not None else None


def _blocks(run: EngineRun) -> tuple[int, int]:
    """vLLM's (block size in tokens, number of blocks) from its cache_config_info; 0 where it reports none."""
    info = _labels(run.after, "vllm:cache_config_info")
    return int(info.get("block_size") or 0), int(info.get("num_gpu_blocks") or 0)


def scheduler_facts(run: EngineRun) -> dict[str, object]:
    """What the engine's scheduler did during the replay, from its own metrics (deltas over the replay) and the
    state polled every 0.1 s; None where the engine does not report a figure."""
    states = run.result.engine_states
    if run.engine == LLAMACPP:
        passes = _delta(run, "llamacpp:n_decode_total")  # one llama_decode call per forward pass
        generated = _delta(run, "llamacpp:tokens_predicted_total")
        prompt = _delta(run, "llamacpp:prompt_tokens_total")
        all_tokens = generated + prompt if generated is not None and prompt is not None else None
        cells = run.context * run.batch_limit if run.context else None  # llamacpp.serve: -c = slots x context
        batching = f"{run.batch_limit} fixed slots (--parallel)"
        kv_cache = f"{cells:,} token cells reserved at start" if cells else "reserved at start"
        peak_kv = _peak(states, "kv_tokens")
        preemptions = None
    else:
        block, blocks = _blocks(run)
        # engine steps: the count of vLLM's histogram of tokens per step, its sum all the tokens they fed
        passes = _delta(run, "vllm:iteration_tokens_total_count")
        generated = _delta(run, "vllm:generation_tokens_total")
        all_tokens = _delta(run, "vllm:iteration_tokens_total_sum")
        batching = f"continuous, up to {run.batch_limit} sequences (--max-num-seqs)"
        kv_cache = f"{blocks:,} blocks of {block} tokens, handed out as requests grow" if blocks else "paged"
        used = _peak(states, "kv_used")
        peak_kv = round(used * blocks) * block if used is not None and blocks else None  # whole blocks
        preemptions = _delta(run, "vllm:num_preemptions_total")
    facts = {
        "cores": run.cores,
        "batching": batching,
        "kv_cache": kv_cache,
        "forward_passes": passes,
        "generated_per_pass": _per_pass(generated, passes),
        "tokens_per_pass": _per_pass(all_tokens, passes),
        "peak_waiting": _peak(states, "waiting"),
        "peak_kv_tokens": peak_kv,
        "preemptions": preemptions,
    }
    if run.engine != LLAMACPP:
        facts["block_size"] = block or None  # not a table row: for the verdict
    return facts


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


def scheduler_table(runs: dict[str, EngineRun]) -> pd.DataFrame:
    """A row per fact (FACT_NAMES), a column per engine, numbers formatted; "not reported" where none."""
    columns = {}
    for engine, run in runs.items():
        facts = scheduler_facts(run)
        columns[engine] = [_format(facts[key]) for key in FACT_NAMES]
    return pd.DataFrame(columns, index=list(FACT_NAMES.values()))


def _format(value) -> str:
    if value is None:
        return "not reported"
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if abs(value) >= 10 or float(value).is_integer() else f"{value:,.2f}"


def verdict(runs: dict[str, EngineRun], weight_bytes: int, slo: SLO = SLO()) -> str:
    """What the side-by-side shows, in sentences built from the measured numbers (both engines must have run);
    `weight_bytes` is the model's weight file size."""
    llama, other = runs[LLAMACPP], runs[VLLM]
    a, b = llama.result.summary(slo), other.result.summary(slo)
    fa, fb = scheduler_facts(llama), scheduler_facts(other)
    text = []
    if a.throughput_tokens_per_s > 0 and b.throughput_tokens_per_s > 0:
        faster, slower = (
            (LLAMACPP, VLLM) if a.throughput_tokens_per_s >= b.throughput_tokens_per_s else (VLLM, LLAMACPP)
        )
        ratio = max(a.throughput_tokens_per_s, b.throughput_tokens_per_s) / min(
            a.throughput_tokens_per_s, b.throughput_tokens_per_s
        )
        text.append(
            f"On this trace **{faster}** streamed {ratio:.1f}× the tokens per second of {slower} "
            f"({a.throughput_tokens_per_s:,.0f} vs {b.throughput_tokens_per_s:,.0f} tokens/s for llama.cpp vs vLLM); "
            f"p95 time to first token {a.ttft_s[95] * 1000:,.0f} vs {b.ttft_s[95] * 1000:,.0f} ms, median time per "
            f"output token {a.tpot_s[50] * 1000:,.2f} vs {b.tpot_s[50] * 1000:,.2f} ms."
        )
    if fa["generated_per_pass"] and fb["generated_per_pass"]:
        text.append(
            f"Both batched: on average {fa['generated_per_pass']:.1f} (llama.cpp) and {fb['generated_per_pass']:.1f} "
            "(vLLM) requests shared each forward pass that generated tokens, counted by each engine itself."
        )
    if fa["peak_kv_tokens"] is not None and fb["peak_kv_tokens"] is not None and llama.context and fb["block_size"]:
        text.append(
            f"Memory is where the schedulers differ most: llama.cpp reserved {llama.context * llama.batch_limit:,} "
            f"token cells at start ({llama.batch_limit} slots × {llama.context}-token context) and at most "
            f"{fa['peak_kv_tokens']:,.0f} were in use; vLLM hands out {fb['block_size']}-token "
            f"blocks as each request grows, and at most {fb['peak_kv_tokens']:,.0f} tokens' worth were held. "
            "That is why vLLM can admit a request whenever blocks are free instead of waiting for a slot: on a GPU, "
            "where KV memory bounds the batch, that buys larger batches."
        )
    text.append(
        f"With {weight_bytes / 1e6:,.0f} MB of weights on this CPU a forward pass is cheap, and per-request work "
        "(HTTP, detokenizing, Python scheduling) weighs more than it would beside a large model on a GPU: the "
        "throughput here says little about the engines on a large model."
    )
    return " ".join(text)


def states_in_tokens(run: EngineRun) -> pd.DataFrame:
    """The polled engine state with vLLM's used fraction of its KV blocks turned into tokens (fraction x blocks x
    block size), so both engines' KV curves share one unit."""
    states = run.result.engine_states.copy()
    block, blocks = _blocks(run)
    if run.engine == VLLM and blocks and states["kv_used"].notna().any():
        states["kv_tokens"] = (states["kv_used"] * blocks).round() * block  # the blocks held, in tokens
    return states
