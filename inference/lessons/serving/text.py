"""The Serve many page's sentences, every number passed in (from the trace, the engine, a model's shape or a
measured run). The longer verdicts on measured runs live beside their arithmetic in `experiments`."""

from __future__ import annotations

from inference.lessons.serving.stats import RequestRecord


def local_engine_note(cache_dir) -> str:
    return (
        f"The app starts `llama-server` on 127.0.0.1 from the cached build in `{cache_dir}` for "
        "each measurement (float32 weights and KV cache, unified KV cache so parallel slots batch) and stops "
        "it afterwards."
    )


def external_engine_note(name: str, url: str) -> str:
    return (
        f"`{name}` from `INFERENCE_LAB_ENGINES`, at {url}: its slots are its own, so only the "
        "trace is replayed (the 1-vs-N comparison needs a server started here)."
    )


def random_shape_note(model_key: str, label: str, shape, vocab: int) -> str:
    """A public model's shape rebuilt with random weights: its size, and why its timing still holds."""
    return (
        f"**{model_key} shape, {label}.** {shape.layers} layers, width {shape.hidden}, MLP "
        f"{shape.mlp_width}, {shape.heads}/{shape.kv_heads} heads, our {vocab:,}-token vocabulary: "
        f"{shape.parameters() / 1e6:,.0f} M parameters, {shape.float32_bytes() / 1e6:,.0f} MB in float32, "
        "read once per decode pass. Its text is nonsense; its timing is real."
    )


def traffic_caption(rate: float, description: str, seed: int) -> str:
    return (
        f"Arrival gaps are random exponential draws (a Poisson process of rate {rate:g}/s) and lengths "
        f"log-normal draws ({description}), all from seed {seed}: the same settings give "
        "the same trace. Prompts are random token ids; the engine is asked for exactly each reply length, "
        "greedy, end-of-text ignored."
    )


def sweep_caption(runs: int, per_rate: int, slots: int, knee_rate: float | None) -> str:
    """The throughput-latency sweep: how it was run, and where its knee is (None: no knee in these rates)."""
    where = (
        f"the knee is at λ = {knee_rate:g}/s, where p95 end-to-end latency first "
        "passes twice its value at the lightest load"
        if knee_rate is not None
        else "no knee within these rates: p95 latency never doubled"
    )
    return (
        f"One run per rate ({runs} runs, {per_rate} requests each, "
        f"the same requests on a faster or slower clock), {slots} slots; {where}. Past the knee the "
        "server cannot keep up: throughput stops following the traffic and requests queue."
    )


def cost_caption(price_per_hour: float, throughput_ratio: float | None) -> str:
    """The replay's throughput in money (`throughput_ratio`: batched over one slot; None when one slot streamed
    nothing, as when all its requests failed)."""
    ratio = "" if throughput_ratio is None else f", {throughput_ratio:.2f}×"
    return (
        f"Measured throughput of the replay above turned into money at ${price_per_hour:,.2f} per "
        "hour (a price you type; the default is illustrative): the same machine, the same traffic, so the "
        f"costs differ by the throughput ratio{ratio}."
    )


def incomplete_batch_sentence(records: list[RequestRecord], batch: int) -> str:
    """One sentence naming the first request that did not complete and why (its own error, or its token count)."""
    failed = next((r for r in records if not r.complete), None)
    done = sum(r.complete for r in records)
    if failed is None:
        return f"Only {len(records)} of {batch} requests sent together came back."
    why = failed.error or f"it received {failed.tokens} of its {failed.asked_tokens} tokens"
    return f"Only {done} of {batch} requests sent together completed: request {failed.index + 1} failed ({why})."
