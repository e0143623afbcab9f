"""Serve many: one engine answering many requests at once, measured on a real llama-server."""

import contextlib

import streamlit as st

from app_pages.shared import engine_pair, layout, models, serving_controls
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.serving_controls import VOCAB
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from inference.core import machine as machine_facts
from inference.engines import llamacpp
from inference.lessons.cost.experiments import cost_per_million_tokens
from inference.lessons.serving import capacity, replay, request_trace
from inference.lessons.serving import models as served_models
from inference.lessons.serving import text as serving_text
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

DEFAULT_PRICE_PER_HOUR = 1.00  # illustrative; the visitor types theirs
SWEEP_POINTS = 5

limits = models.limits()
current_model()  # draws the shared sidebar
presenter = layout.presenter()

st.title("🚦 Serve many")
st.markdown(TEXT["intro"])

# -- the engine and the traffic (folded in presenter mode: they took the projector's first screen before the chart)
configured = limits.engine_urls()
box, now_line = layout.folded_settings(TEXT["settings_label"], "serving_settings_open") if presenter else (None, None)
draw = not presenter or box is not None
with box if box is not None else contextlib.nullcontext():
    engine, local, model_key = serving_controls.engine_and_model(configured, presenter, draw)
    if not presenter:
        st.subheader("1. The traffic")
    shape_name, rate, count, seed = serving_controls.traffic(draw)
if presenter:
    st.subheader("1. The traffic")
trace = request_trace.poisson_trace(shape_name, rate, count, seed, VOCAB)
real_prompts = local and model_key == served_models.REAL  # real questions in SmolLM2's tokenizer
if real_prompts:
    trace = request_trace.with_real_prompts(trace, request_trace.real_tokenizer())
if now_line is not None:
    named = served_models.model_choice_label(model_key, local)
    now_line.caption(TEXT["settings_now"].format(model=named, requests=count, shape=shape_name, rate=rate, seed=seed))
chart(traffic_figure(trace, presenter), width="stretch")
drawn, prompts = ("reply lengths", "prompts_real") if real_prompts else ("lengths", "prompts_random")
description = request_trace.SHAPES[shape_name].description
traffic_text = TEXT["traffic"].format(rate=rate, drawn=drawn, description=description, seed=seed, prompts=TEXT[prompts])
caption("simulated", traffic_text)

# -- 2. one at a time vs batched ------------------------------------------------------------
st.subheader("2. One at a time vs batched")
c1, c2 = st.columns(2)
slots = None  # an engine started elsewhere has the slots it was started with
if local:
    slots = c1.select_slider(
        "Slots in the batched server",
        [2, 4, 8, 16],
        value=8,
        key="serving_slots",
        persist_state="session",
        help="llama-server's --parallel: requests it decodes together in one batch.",
    )
slo_ms = c2.number_input(
    "SLO: time to first token at most (ms)", 50, 60_000, 1000, step=50, key="serving_slo", persist_state="session"
)
slo = replay.SLO(ttft_s=slo_ms / 1000)
model_label = model_key if local else engine
if local:  # beside the button that starts it
    st.caption(TEXT["local_engine"].format(cache_dir=llamacpp.cache_dir()))

results = measure_on_click(
    f"Replay the trace: 1 slot, then {slots} slots" if local else f"Replay the trace against {engine}",
    key="serving_compare",
    result_key=("serving", engine, model_label, trace.key, slots if local else None),
    measure=lambda progress: (
        capacity.single_vs_batched(served_models.model_on_engine(model_key), trace, slots, progress)
        if local
        else {0: replay.replay_on_engine(configured[engine], trace, progress)}
    ),
    not_yet="Nobody has replayed this trace on this engine yet: press the button (the progress bar counts the "
    "requests).",
    background=True,
)

if results:
    named = {serving_text.run_name(n, engine): r.summary(slo) for n, r in sorted(results.items())}
    chart(comparison_figure(named, presenter), width="stretch", text=serving_text.runs_sentence(named))
    if local:
        weights = served_models.weight_file(model_key, vocab_size=VOCAB).stat().st_size
        streamed = replay.streamed_tokens_per_s(results[1].records, trace.duration_s)
        llc = machine_facts.last_level_cache_bytes()
        st.markdown(serving_text.one_vs_many_verdict(results, slots, slo, weights, llc, streamed))
    longest = max(r.wall_s for r in results.values())
    for column, (n, result) in zip(layout.side_by_side(len(results)), sorted(results.items())):
        name = serving_text.run_name(n, engine)
        with column:
            # two-line titles: a half-width chart at 800 px cut "Each request, 1 slot (one at a time)"
            chart(gantt_figure(result.table(), f"Each request<br>{name}", presenter, longest), width="stretch")
            state_title = f"Inside the engine<br>{name}"
            chart(engine_state_figure(result.engine_states, state_title, presenter, longest), width="stretch")
            failed = [r for r in result.records if r.error]
            if failed:
                st.warning(f"{len(failed)} request(s) failed: {failed[0].error}")
    if real_prompts:
        with st.expander(TEXT["texts_summary"].format(requests=len(trace.requests))):
            texts = request_trace.texts_table(request_trace.real_tokenizer(), trace, results[max(results)].records)
            st.dataframe(texts, hide_index=True)
    caption("measured", TEXT["gantt"])

if not local:
    st.stop()

# -- the same trace on llama.cpp and vLLM ------------------------------------------------------
engine_pair.section(model_key, trace, slots, slo, presenter)

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
    result_key=("serving-sweep", model_label, shape_name, tuple(rates), per_rate, seed, slots),
    measure=lambda progress: capacity.rate_sweep(
        served_models.model_on_engine(model_key), shape_name, rates, per_rate, seed, VOCAB, slots, slo, progress
    ),
    not_yet="No sweep for these settings yet.",
    background=True,
)
if sweep is not None:
    knee = capacity.knee_index(list(sweep["rate_per_s"]), list(sweep["e2e_p95_ms"]))
    chart(sweep_figure(sweep, knee, presenter), width="stretch")
    where = TEXT["no_knee"] if knee is None else TEXT["knee"].format(rate=sweep["rate_per_s"].iloc[knee])
    sweep_text = TEXT["sweep"].format(
        per_rate=per_rate, rates=len(sweep), total=len(sweep) * per_rate, slots=slots, knee=where
    )
    caption("measured", sweep_text)

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
weights_file = served_models.weight_file(model_key, vocab_size=VOCAB)
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
    chart(roofline_figure(roof, points, presenter), width="stretch")
    caption("measured", TEXT["roofline"].format(how=machine.how, prompt=mean_prompt))
    measured = measure_on_click(
        "Measure decode at batch 1, 2, 4, 8",
        key="serving_batches",
        result_key=("serving-batches", model_label),
        not_yet="Decode at batch B is not measured yet.",
        measure=lambda progress: capacity.decode_batches(served_models.model_on_engine(model_key), progress=progress),
        background=True,
    )
    if measured is not None:
        table = capacity.predicted_vs_measured(served, roof, measured)
        chart(predicted_vs_measured_figure(table, presenter), width="stretch")
        st.markdown(serving_text.roofline_verdict(table, served.weight_bytes_per_pass, machine.last_level_cache_bytes))
        batch_text = TEXT["batches"].format(prompt=capacity.BATCH_PROMPT_TOKENS, reply=capacity.BATCH_REPLY_TOKENS)
        caption("measured", batch_text)

# -- 5. cost --------------------------------------------------------------------------------
st.subheader("5. What a million tokens costs")
st.markdown(
    TEXT["capacity_note"].format(slots=slots, per_client=capacity.REQUESTS_PER_CLIENT, reply=capacity.REPLY_TOKENS)
)
at_capacity = measure_on_click(
    f"Measure capacity: 1 slot, then {slots}",
    key="serving_capacity",
    result_key=("serving-capacity", model_label, slots),
    measure=lambda progress: capacity.one_vs_many(served_models.model_on_engine(model_key), slots, progress),
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
            help=f"{run.tokens_per_s:,.0f} tokens/s at capacity (closed loop, {run.clients} clients)",
        )
    one, many = at_capacity[1].tokens_per_s, at_capacity[max(at_capacity)].tokens_per_s
    caption("measured", TEXT["cost"].format(one=one, many=many, slots=max(at_capacity), price=price))
