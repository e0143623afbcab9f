"""Serve many: one engine answering many requests at once, measured on a real llama-server (and vLLM beside it)."""

import contextlib

import streamlit as st

from app_pages.shared import layout
from app_pages.shared import models as app_models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from inference.core import machine as machine_facts
from inference.core import real_model
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, VLLM
from inference.lessons.cost.experiments import cost_per_million_tokens
from inference.lessons.serving import capacity, replay, request_trace, text, two_engines
from inference.lessons.serving import models as served_models
from inference.lessons.serving.figures import (
    comparison_figure,
    engine_state_figure,
    gantt_figure,
    predicted_vs_measured_figure,
    roofline_figure,
    sweep_figure,
    traffic_figure,
)
from inference.lessons.serving.roofline import ServedModel, decode_pass, measure_machine_roof, prefill_pass
from inference.lessons.serving.text import TEXT

LOCAL = "llama-server started here"
VOCAB = served_models.VOCAB  # trace prompts are ids below it
# Opens where one slot falls behind on the bundled model: alone it streams roughly 500 short-chat tokens/s on a
# 2-core CPU (docs/BENCHMARKS.md's serving figures), and the default 16 draws at 16/s ask for about 680 over 1.3 s.
SETTINGS = {"serving_shape": "short chat", "serving_rate": 16.0, "serving_requests": 16, "serving_seed": 0}
DEFAULT_PRICE_PER_HOUR = 1.00  # illustrative; the visitor types theirs
SWEEP_POINTS = 5
ROW = dict(horizontal=True)

current_model()  # draws the shared sidebar
presenter = layout.presenter()
state = st.session_state

st.title("🚦 Serve many")
st.markdown(TEXT["intro"])


def run_charts(runs: dict, engine_states: dict, slo, tell_failed: str = "") -> None:
    """Every run's Gantt and engine state side by side, on one time axis; {name: ReplayResult}."""
    longest = max(r.wall_s for r in runs.values())
    for column, (name, result) in zip(layout.side_by_side(len(runs)), runs.items()):
        with column:  # two-line titles: a half-width chart at 800 px cut "Each request, 1 slot (one at a time)"
            chart(gantt_figure(result.table(), f"Each request<br>{name}", presenter, longest))
            chart(engine_state_figure(engine_states[name], f"Inside the engine<br>{name}", presenter, longest))
            failed = [r for r in result.records if r.error]
            if failed:
                st.warning(f"{len(failed)} request(s) failed{tell_failed}: {failed[0].error}")


# -- the engine and the traffic (folded in presenter mode: they took the projector's first screen before the chart)
configured = app_models.limits().engine_urls()
engines = ([LOCAL] if llamacpp.is_built() else []) + list(configured)
if not engines:
    st.warning(TEXT["no_engine"])
    st.stop()
model_options = served_models.model_options()
for key, options in (("serving_engine", engines), ("serving_model", model_options)):
    if state.get(key) not in options:  # a kept choice no longer offered
        state[key] = options[0]
for key, value in SETTINGS.items():
    state.setdefault(key, value)
box, now_line = (
    layout.folded_settings(TEXT["settings_label"], "serving_settings_open") if presenter else (st.container(), None)
)
local = state.serving_engine == LOCAL
with box if box is not None else contextlib.nullcontext():
    if box is not None:
        # each choice only once there is one: a radio of one option takes a projector's screen for nothing; two stack
        # in presenter mode (a half column made the real model's long name eight lines at 800 px)
        wide = len(engines) > 1 and LOCAL in engines and not presenter
        c1, c2 = st.columns(2) if wide else (st.container(), st.container())
        if len(engines) > 1:
            c1.radio("Engine", engines, key="serving_engine", **ROW, persist_state="session")
        local = state.serving_engine == LOCAL
        if not local:  # an engine started elsewhere serves the model it was started with
            st.caption(TEXT["external_engine"].format(name=state.serving_engine, url=configured[state.serving_engine]))
        else:
            label = served_models.LABELS.get
            c2.radio(
                "Model on the engine",
                model_options,
                key="serving_model",
                format_func=label,
                **ROW,
                persist_state="session",
            )
            if state.serving_model == served_models.REAL:  # a caption, not a box: the radio above names the model
                mb = served_models.weight_file(state.serving_model).stat().st_size / 1e6
                st.caption(TEXT["real_model"].format(questions=len(request_trace.QUESTIONS), mb=mb))
            elif state.serving_model != served_models.BUNDLED:
                if not real_model.is_available():
                    st.caption(TEXT["real_fallback"])
                config = served_models.random_config()
                parameters = sum(p.numel() for p in served_models.skeleton(config).parameters())
                fields = dict(parameters_m=parameters / 1e6, mb=4 * parameters / 1e6, vocab=VOCAB)
                fields |= dict(key=served_models.RANDOM, label=served_models.LABEL, c=config)
                st.caption(TEXT["random_shape"].format(**fields))
        if not presenter:
            st.subheader("1. The traffic")
        c1, c2 = st.columns(2)
        c3, c4 = st.columns(2)
        c1.selectbox("Requests like", list(request_trace.SHAPES), key="serving_shape", persist_state="session")
        rates = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
        c2.select_slider("Arrival rate λ (requests/s)", rates, key="serving_rate", persist_state="session")
        c3.slider("Requests", 4, 48, step=4, key="serving_requests", persist_state="session")
        c4.number_input("Seed", 0, 10_000, key="serving_seed", persist_state="session")
engine, model_key = state.serving_engine, state.serving_model if local else state.serving_engine
shape_name, rate, count = state.serving_shape, state.serving_rate, int(state.serving_requests)
seed = int(state.serving_seed)
if presenter:
    st.subheader("1. The traffic")
trace = request_trace.poisson_trace(shape_name, rate, count, seed, VOCAB)
real_prompts = local and model_key == served_models.REAL  # real questions in SmolLM2's tokenizer
if real_prompts:
    trace = request_trace.with_real_prompts(trace, request_trace.real_tokenizer())
if now_line is not None:
    named = served_models.LABELS[model_key] if local else engine
    now_line.caption(TEXT["settings_now"].format(model=named, requests=count, shape=shape_name, rate=rate, seed=seed))
chart(traffic_figure(trace, presenter))
drawn, prompts = ("reply lengths", "prompts_real") if real_prompts else ("lengths", "prompts_random")
description = request_trace.SHAPES[shape_name].description
caption(
    "simulated",
    TEXT["traffic"].format(rate=rate, drawn=drawn, description=description, seed=seed, prompts=TEXT[prompts]),
)

# -- 2. one at a time vs batched ------------------------------------------------------------
st.subheader("2. One at a time vs batched")
c1, c2 = st.columns(2)
slots = None  # an engine started elsewhere has the slots it was started with
if local:
    help_slots = "llama-server's --parallel: requests it decodes together in one batch."
    slots = c1.select_slider(
        "Slots in the batched server", [2, 4, 8, 16], 8, key="serving_slots", help=help_slots, persist_state="session"
    )
slo_ms = c2.number_input(
    "SLO: time to first token at most (ms)", 50, 60_000, 1000, step=50, key="serving_slo", persist_state="session"
)
slo = replay.SLO(ttft_s=slo_ms / 1000)
if local:  # beside the button that starts it
    st.caption(TEXT["local_engine"].format(cache_dir=llamacpp.cache_dir()))
model = lambda: served_models.model_on_engine(model_key)  # noqa: E731 - built or converted on the first click
results = measure_on_click(
    f"Replay the trace: 1 slot, then {slots} slots" if local else f"Replay the trace against {engine}",
    key="serving_compare",
    result_key=("serving", engine, model_key, trace.key, slots),
    measure=lambda progress: (
        capacity.single_vs_batched(model(), trace, slots, progress)
        if local
        else {0: replay.replay_on_engine(configured[engine], trace, progress)}
    ),
    not_yet="Nobody has replayed this trace on this engine yet: press the button (the progress bar counts the "
    "requests).",
    background=True,
)
if results:
    named = {text.run_name(n, engine): r for n, r in sorted(results.items())}
    summaries = {name: r.summary(slo) for name, r in named.items()}
    chart(comparison_figure(summaries, presenter), text=text.runs_sentence(summaries))
    if local:
        weights = served_models.weight_file(model_key).stat().st_size
        st.markdown(text.one_vs_many_verdict(results, slo, weights, machine_facts.last_level_cache_bytes()))
    run_charts(named, {name: r.engine_states for name, r in named.items()}, slo)
    if real_prompts:
        with st.expander(TEXT["texts_summary"].format(requests=len(trace.requests))):
            tokenizer = request_trace.real_tokenizer()
            st.dataframe(request_trace.texts_table(tokenizer, trace, results[max(results)].records), hide_index=True)
    caption("measured", TEXT["gantt"])
if not local:
    st.stop()

# -- the same trace on llama.cpp and vLLM ------------------------------------------------------
st.subheader("Two engines, one trace: llama.cpp and vLLM")
st.markdown(TEXT["pair_intro"].format(slots=slots))
missing = two_engines.available()
picked = st.multiselect(
    "Engines",
    list(two_engines.ENGINES),
    [e for e in two_engines.ENGINES if e not in missing],
    key="serving_pair_engines",
    persist_state="session",
)
for missed in set(picked) & set(missing):
    st.info(missing[missed])
runnable = [e for e in picked if e not in missing]
pair = runnable and measure_on_click(
    f"Replay the trace on {' and '.join(runnable)}",
    key="serving_pair",
    result_key=("serving-pair", model_key, trace.key, slots, tuple(runnable)),
    measure=lambda progress: two_engines.replay_on_engines(model(), trace, slots, runnable, progress),
    not_yet=TEXT["pair_not_yet"],
    background=True,
)
if pair:
    chart(comparison_figure({e: r.result.summary(slo) for e, r in pair.items()}, presenter))
    if LLAMACPP in pair and VLLM in pair:
        weights = served_models.weight_file(model_key).stat().st_size
        facts = {e: two_engines.scheduler_facts(run) for e, run in pair.items()}
        st.markdown(text.engines_verdict(pair, facts, weights, slo))
    st.dataframe(two_engines.scheduler_table(pair))
    caption("measured", TEXT["pair_facts"])
    states = {e: two_engines.states_in_tokens(run) for e, run in pair.items()}
    run_charts({e: run.result for e, run in pair.items()}, states, slo, tell_failed=" on that engine")
    caption("measured", TEXT["pair_gantt"])

# -- 3. the throughput-latency curve ---------------------------------------------------------
st.subheader("3. The throughput-latency curve")
c1, c2 = st.columns(2)
low, high = c1.select_slider(
    "Arrival rates swept (requests/s)",
    [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
    value=(1.0, 32.0),  # past one server's capacity on the bundled model: the knee lies inside
    key="serving_sweep_rates",
    persist_state="session",
)
per_rate = c2.slider("Requests per rate", 4, 32, 12, step=4, key="serving_sweep_requests", persist_state="session")
rates = sorted({round(low * (high / low) ** (i / (SWEEP_POINTS - 1)), 3) for i in range(SWEEP_POINTS)})
sweep = measure_on_click(
    "Sweep the arrival rate",
    key="serving_sweep",
    result_key=("serving-sweep", model_key, shape_name, tuple(rates), per_rate, seed, slots),
    measure=lambda progress: capacity.rate_sweep(
        model(), shape_name, rates, per_rate, seed, VOCAB, slots, slo, progress
    ),
    not_yet="No sweep for these settings yet.",
    background=True,
)
if sweep is not None:
    knee = capacity.knee_index(list(sweep["rate_per_s"]), list(sweep["e2e_p95_ms"]))
    chart(sweep_figure(sweep, knee, presenter))
    where = TEXT["no_knee"] if knee is None else TEXT["knee"].format(rate=sweep["rate_per_s"].iloc[knee])
    fields = dict(per_rate=per_rate, rates=len(sweep), total=len(sweep) * per_rate, slots=slots, knee=where)
    caption("measured", TEXT["sweep"].format(**fields))

# -- 4. the roofline ------------------------------------------------------------------------
st.subheader("4. What the hardware allows: the roofline")
machine = measure_on_click(
    "Measure this machine (bandwidth and peak FLOP/s)",
    key="serving_machine",
    result_key="serving-machine",
    measure=lambda progress: measure_machine_roof(),
    not_yet="This machine's memory bandwidth and peak arithmetic are not measured yet.",
    background=True,
)
weights_file = served_models.weight_file(model_key)
if machine is not None and not weights_file.is_file():
    st.info("The model is built by the first replay above; then its roofline appears here.")
elif machine is not None:
    roof, served = machine.roof, ServedModel.from_safetensors(weights_file)
    mean_prompt = round(trace.prompt_tokens / len(trace.requests))
    points = [prefill_pass(served, mean_prompt)] + [decode_pass(served, b, mean_prompt) for b in capacity.BATCHES]
    c1, c2, c3 = layout.metric_cells(3)
    c1.metric("GB/s memory bandwidth", f"{roof.bandwidth_bytes_per_s / 1e9:.1f}")
    peak = TEXT["peak_label"].format(threads=machine.threads)
    c2.metric(peak, f"{roof.peak_flops / 1e9:.0f}", help=TEXT["peak_help"])
    c3.metric("MB of weights per pass", f"{served.weight_bytes_per_pass / 1e6:,.0f}")
    chart(roofline_figure(roof, points, presenter))
    caption("measured", TEXT["roofline"].format(how=machine.how, prompt=mean_prompt))
    measured = measure_on_click(
        "Measure decode at batch 1, 2, 4, 8",
        key="serving_batches",
        result_key=("serving-batches", model_key),
        not_yet="Decode at batch B is not measured yet.",
        measure=lambda progress: capacity.decode_batches(model(), progress=progress),
        background=True,
    )
    if measured is not None:
        table = capacity.predicted_vs_measured(served, roof, measured)
        chart(predicted_vs_measured_figure(table, presenter))
        st.markdown(text.roofline_verdict(table, served.weight_bytes_per_pass, machine.last_level_cache_bytes))
        lengths = dict(prompt=capacity.BATCH_PROMPT_TOKENS, reply=capacity.BATCH_REPLY_TOKENS)
        caption("measured", TEXT["batches"].format(**lengths))

# -- 5. cost --------------------------------------------------------------------------------
st.subheader("5. What a million tokens costs")
burst = dict(requests=capacity.REQUESTS_PER_SLOT * slots, prompt=capacity.PROMPT_TOKENS, reply=capacity.REPLY_TOKENS)
st.markdown(TEXT["capacity_note"].format(slots=slots, **burst))
at_capacity = measure_on_click(
    f"Measure capacity: 1 slot, then {slots}",
    key="serving_capacity",
    result_key=("serving-capacity", model_key, slots),
    measure=lambda progress: capacity.one_vs_many(model(), slots, progress),
    not_yet="This server's capacity is not measured yet.",
    background=True,
)
if at_capacity is not None:
    price = st.number_input(
        "Price of this machine per hour ($)",
        0.0,
        1000.0,
        DEFAULT_PRICE_PER_HOUR,
        step=0.1,
        key="serving_price",
        persist_state="session",
    )
    for column, (n, run) in zip(layout.metric_cells(len(at_capacity)), sorted(at_capacity.items())):
        column.metric(
            f"{n} slot{'s' if n > 1 else ''}: per million tokens",
            f"${cost_per_million_tokens(1000 / run.tokens_per_s, price):,.2f}",
            help=f"{run.tokens_per_s:,.0f} tokens/s at capacity ({run.requests} requests sent at once)",
        )
    one, many = at_capacity[1].tokens_per_s, at_capacity[max(at_capacity)].tokens_per_s
    caption("measured", TEXT["cost"].format(one=one, many=many, slots=max(at_capacity), price=price))
