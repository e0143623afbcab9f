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
from inference.lessons.serving import capacity, experiments, random_model, real_text
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
from inference.lessons.serving.request_trace import SHAPES, poisson_trace
from inference.lessons.serving.roofline import ServedModel, decode_pass, measure_machine_roof, prefill_pass
from inference.lessons.serving.stats import SLO, knee_index, streamed_tokens_per_s

DEFAULT_PRICE_PER_HOUR = 1.00  # illustrative; the visitor types theirs
SWEEP_POINTS = 5
BATCHES = (1, 2, 4, 8)


limits = models.limits()
current_model()  # draws the shared sidebar
presenter = layout.presenter()

st.title("🚦 Serve many")
st.markdown(serving_text.INTRO)

# -- the engine and the traffic (folded in presenter mode: they took the projector's first screen before the chart)
configured = limits.engine_urls()
if presenter:
    box, now_line = layout.folded_settings(serving_text.SETTINGS_LABEL, "serving_settings_open")
    draw = box is not None
    with box if draw else contextlib.nullcontext():
        engine, local, model_key = serving_controls.engine_and_model(configured, presenter, draw)
        shape_name, rate, count, seed = serving_controls.traffic(draw)
    st.subheader("1. The traffic")
else:
    now_line = None
    engine, local, model_key = serving_controls.engine_and_model(configured, presenter)
    st.subheader("1. The traffic")
    shape_name, rate, count, seed = serving_controls.traffic()
trace = poisson_trace(shape_name, rate, count, seed, VOCAB)
real_prompts = local and model_key == experiments.REAL  # real questions in SmolLM2's tokenizer (#45 item 4)
if real_prompts:
    trace = real_text.with_real_prompts(trace, real_text.real_tokenizer())
if now_line is not None:
    model_named = experiments.model_choice_label(model_key, local, random_model.LABEL)  # the engine's name if external
    now_line.caption(serving_text.settings_now(model_named, shape_name, rate, count, seed))
chart(traffic_figure(trace, presenter), width="stretch")
caption("simulated", serving_text.traffic_caption(rate, SHAPES[shape_name].description, seed, real_prompts))

# -- 2. one at a time vs batched ------------------------------------------------------------
st.subheader("2. One at a time vs batched")
c1, c2 = st.columns(2)
slots = (
    c1.select_slider(
        "Slots in the batched server",
        [2, 4, 8, 16],
        value=8,
        key="serving_slots",
        persist_state="session",
        help="llama-server's --parallel: requests it decodes together in one batch.",
    )
    if local
    else None
)  # an engine started elsewhere has the slots it was started with
slo_ms = c2.number_input(
    "SLO: time to first token at most (ms)", 50, 60_000, 1000, step=50, key="serving_slo", persist_state="session"
)
slo = SLO(ttft_s=slo_ms / 1000)
model_label = model_key if local else engine
if local:  # beside the button that starts it
    st.caption(serving_text.local_engine_note(llamacpp.cache_dir()))


def run_comparison(progress):
    model = experiments.model_on_engine(model_key)
    return experiments.single_vs_batched(model, trace, slots, progress)


def run_external(progress):
    return {0: experiments.run_trace_on_engine(configured[engine], trace, progress)}


results = measure_on_click(
    f"Replay the trace: 1 slot, then {slots} slots" if local else f"Replay the trace against {engine}",
    key="serving_compare",
    result_key=("serving", engine, model_label, trace.key, slots if local else None),
    measure=run_comparison if local else run_external,
    not_yet="Nobody has replayed this trace on this engine yet: press the button (the progress bar counts the "
    "requests).",
    background=True,
)


if results:
    summaries = {n: r.summary(slo) for n, r in sorted(results.items())}
    named = {serving_text.run_name(n, engine): s for n, s in summaries.items()}
    chart(comparison_figure(named, presenter), width="stretch", text=serving_text.comparison_sentence(named))
    if local:
        weights = experiments.weight_file(model_key, vocab_size=VOCAB).stat().st_size
        llc = machine_facts.last_level_cache_bytes()
        one_streamed = streamed_tokens_per_s(results[1].records, trace.duration_s)
        st.markdown(
            experiments.comparison_verdict(summaries[1], summaries[slots], slots, trace, weights, llc, one_streamed)
        )
    longest = max(r.wall_s for r in results.values())
    columns = layout.side_by_side(len(results))
    for column, (n, result) in zip(columns, sorted(results.items())):
        name = serving_text.run_name(n, engine)
        with column:
            # two-line titles: a half-width chart at 800 px cut "Each request, 1 slot (one at a time)"
            chart(gantt_figure(result.table(), f"Each request<br>{name}", presenter, longest), width="stretch")
            chart(
                engine_state_figure(result.engine_states, f"Inside the engine<br>{name}", presenter, longest),
                width="stretch",
            )
            failed = [r for r in result.records if r.error]
            if failed:
                st.warning(f"{len(failed)} request(s) failed: {failed[0].error}")
    if real_prompts:
        with st.expander(serving_text.texts_summary(len(trace.requests))):
            batched = results[max(results)]
            st.dataframe(real_text.texts_table(real_text.real_tokenizer(), trace, batched.records), hide_index=True)
    caption(
        "measured",
        "Each bar is one request: sent at its arrival time, grey while it waits for a free "
        "slot, blue for its prefill (the engine's own prompt time, so grey + blue is the measured time "
        "to first token), orange while its tokens stream, each token timestamped as it arrived. The "
        "engine's running and waiting requests and the KV-cache tokens its running requests hold are "
        "read from its `/slots` and `/metrics` every 0.1 s. One run each; the machine is shared, so "
        "timings move by tens of percent between runs.",
    )

# -- the same trace on llama.cpp and vLLM ------------------------------------------------------
if local:
    engine_pair.section(model_key, trace, slots, slo, presenter)

# -- 3. the throughput-latency curve ---------------------------------------------------------
if local:
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
        measure=lambda progress: experiments.rate_sweep(
            experiments.model_on_engine(model_key), shape_name, rates, per_rate, seed, VOCAB, slots, slo, progress
        ),
        not_yet="No sweep for these settings yet.",
        background=True,
    )
    if sweep is not None:
        knee = knee_index(list(sweep["rate_per_s"]), list(sweep["e2e_p95_ms"]))
        chart(sweep_figure(sweep, knee, presenter), width="stretch")
        knee_rate = sweep["rate_per_s"].iloc[knee] if knee is not None else None
        caption("measured", serving_text.sweep_caption(len(sweep), per_rate, slots, knee_rate))

# -- 4. the roofline ------------------------------------------------------------------------
if local:
    st.subheader("4. What the hardware allows: the roofline")
    machine = measure_on_click(
        "Measure this machine (bandwidth and peak FLOP/s)",
        key="serving_machine",
        result_key="serving-machine",
        measure=lambda progress: measure_machine_roof(),
        not_yet="This machine's memory bandwidth and peak arithmetic are not measured yet.",
        background=True,
    )
    if machine is not None:
        roof = machine.roof
        weights = experiments.weight_file(model_key, vocab_size=VOCAB)
        if not weights.is_file():
            st.info("The model is built by the first replay above; then its roofline appears here.")
        else:
            served = ServedModel.from_safetensors(weights)
            mean_prompt = round(trace.prompt_tokens / len(trace.requests))
            points = [prefill_pass(served, mean_prompt)] + [decode_pass(served, b, mean_prompt) for b in BATCHES]
            c1, c2, c3 = layout.metric_cells(3)
            c1.metric("GB/s memory bandwidth", f"{roof.bandwidth_bytes_per_s / 1e9:.1f}")
            c2.metric(
                serving_text.peak_label(machine.threads), f"{roof.peak_flops / 1e9:.0f}", help=serving_text.PEAK_HELP
            )
            c3.metric("MB of weights per pass", f"{served.weight_bytes_per_pass / 1e6:,.0f}")
            chart(roofline_figure(roof, points, presenter), width="stretch")
            caption("measured", serving_text.roofline_caption(machine.how, mean_prompt))
            measured = measure_on_click(
                "Measure decode at batch 1, 2, 4, 8",
                key="serving_batches",
                result_key=("serving-batches", model_label),
                not_yet="Decode at batch B is not measured yet.",
                measure=lambda progress: experiments.decode_batches(
                    experiments.model_on_engine(model_key), BATCHES, progress
                ),
                background=True,
            )
            if measured is not None:
                table = experiments.predicted_vs_measured(served, roof, measured)
                chart(predicted_vs_measured_figure(table, presenter), width="stretch")
                st.markdown(experiments.roofline_verdict(table, served, machine.last_level_cache_bytes))
                caption(
                    "measured",
                    serving_text.batches_caption(experiments.BATCH_PROMPT_TOKENS, experiments.BATCH_REPLY_TOKENS),
                )

# -- 5. cost --------------------------------------------------------------------------------
if local:
    st.subheader("5. What a million tokens costs")
    st.markdown(serving_text.capacity_note(slots, capacity.REQUESTS_PER_CLIENT, capacity.REPLY_TOKENS))
    at_capacity = measure_on_click(
        f"Measure capacity: 1 slot, then {slots}",
        key="serving_capacity",
        result_key=("serving-capacity", model_label, slots),
        measure=lambda progress: capacity.one_vs_many(experiments.model_on_engine(model_key), slots, progress),
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
        cols = layout.metric_cells(len(at_capacity))
        for column, (n, run) in zip(cols, sorted(at_capacity.items())):
            cost = cost_per_million_tokens(1000 / run.tokens_per_s, price)
            column.metric(
                f"{n} slot{'s' if n > 1 else ''}: per million tokens",
                f"${cost:,.2f}",
                help=f"{run.tokens_per_s:,.0f} tokens/s at capacity (closed loop, {run.clients} clients)",
            )
        one, many = at_capacity[1].tokens_per_s, at_capacity[max(at_capacity)].tokens_per_s
        caption("measured", serving_text.cost_caption(price, one, many, max(at_capacity)))
