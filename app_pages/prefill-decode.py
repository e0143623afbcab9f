"""Prefill vs decode: why the first token and every later token cost so differently."""

import streamlit as st
import torch

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import engine_errors, generation_slot
from inference.core import machine
from inference.core.calculator import load_public_models, weight_bytes
from inference.core.flops import FlopCount
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.remote import is_remote
from inference.core.run import STOP_EOS
from inference.lessons import glossary
from inference.lessons.prefill_decode import text as pd_text
from inference.lessons.prefill_decode.engine_timing import remote_generation_timing, remote_sweep
from inference.lessons.prefill_decode.figures import sweep_rate_figure, sweep_time_figure, timeline_figure
from inference.lessons.prefill_decode.text import TEXT
from inference.lessons.prefill_decode.timing import (
    SATURATION,
    crossover_prompt_tokens,
    default_prompt_lengths,
    findings,
    measure_sweep,
    time_generation,
)

RUN_KEY = "pd_timing"
DECODE_TOKENS = 8  # one-token passes timed after each sweep prompt
ILLUSTRATIVE_MODEL = "Llama-3.1-8B"  # the big model of the GPU picture
ILLUSTRATIVE_BANDWIDTH = 1e12  # bytes/s of the made-up GPU in that picture


limits = models.limits()
loaded = current_model(remote_ok=True)
remote = is_remote(loaded)
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info


st.title("⏱️ Prefill vs decode")
st.markdown(TEXT["intro"])

# -- 1. one generation -------------------------------------------------------------------
st.subheader("One generation, timed")
# presenter mode: the prompt and its controls one above the other (a quarter of 800 px squeezed the slider)
left, right = (st.container(), st.container()) if layout.presenter() else st.columns([3, 1])
opening = opening_prompt("prefill_decode", info.name).text
left.text_area("Prompt", opening, key="pd_prompt", persist_state="session", height=100, max_chars=20_000)
new_tokens = right.slider(
    "New tokens", 8, min(128, limits.max_new_tokens), 48, step=8, key="pd_new_tokens", persist_state="session"
)
run_again = right.button("Run again", key="pd_run", help="Timings change a little every time: the machine is shared.")

prepared = prepare_prompt(tokenizer, st.session_state.pd_prompt, False, info.context, limits)
for note in prepared.notes:
    st.info(note)
if prepared.error:
    st.warning(prepared.error)
    st.stop()

run_key = (info.name, tuple(prepared.ids), min(new_tokens, prepared.max_new_tokens))
stored = st.session_state.get(RUN_KEY)
if stored is None or stored[0] != run_key or run_again:
    with generation_slot(), engine_errors():
        if remote:  # the engine's own timings, streamed
            timing, server_timings = remote_generation_timing(model, tokenizer, prepared.ids, run_key[2])
        else:
            timing, server_timings = time_generation(model, tokenizer, prepared.ids, run_key[2]), None
        st.session_state[RUN_KEY] = (run_key, timing, server_timings)
if RUN_KEY not in st.session_state:
    st.stop()  # a serving engine failed on the first run: its message is shown
timing, server_timings = st.session_state[RUN_KEY][1], st.session_state[RUN_KEY][2]

timeline = timeline_figure(timing, layout.presenter())
chart(timeline, width="stretch", key="pd_timeline", text=pd_text.timeline_sentence(timing))
how = pd_text.run_how(timing)
caption(
    "measured", TEXT["remote_caption" if remote else "local_caption"].format(url=loaded.url if remote else "", how=how)
)
tpot_ms = timing.tpot_ms
if server_timings is not None and server_timings.decode_tokens_per_s:
    tpot_ms = 1000 / server_timings.decode_tokens_per_s
m = layout.metric_cells(4)  # two rows of two (one a row in presenter mode): the values stay whole on a narrow screen
m[0].metric("Time to first token", f"{timing.ttft_ms:.1f} ms", help="The prefill pass plus choosing the first token.")
if tpot_ms is not None:
    m[1].metric(
        "Time per output token",
        f"{tpot_ms:.2f} ms",
        help=TEXT["tpot_help"].format(steps=len(timing.decode_steps), how=how),
    )
    m[3].metric("Decode, tokens/s", f"{1000 / tpot_ms:,.0f}", help="New tokens written per second.")
m[2].metric(
    "Prefill, tokens/s",
    f"{timing.prefill_tokens_per_s:,.0f}",
    help=f"{timing.prompt_tokens} prompt tokens ÷ the prefill pass ({timing.prefill_ms:.1f} ms).",
)
if timing.stop_reason == STOP_EOS:
    st.caption(f"The model chose its end-of-text token after {len(timing.steps)} tokens.")

# -- 2. the sweep ------------------------------------------------------------------------
st.subheader("Sweep: how time grows with the prompt")
lengths = default_prompt_lengths(info.context)
st.markdown(TEXT["sweep_intro"].format(lengths=", ".join(map(str, lengths)), decode=DECODE_TOKENS))
c1, c2 = st.columns([1, 1] if layout.presenter() else [1, 3])  # "Runs per point" broke into three lines
repeats = c1.slider("Runs per point", 3, 9, 5, key="pd_repeats", persist_state="session")
sweep = None
with engine_errors():
    sweep = measure_on_click(
        "Run the sweep",
        "pd_sweep",
        ("sweep", info.name),
        lambda progress: (remote_sweep if remote else measure_sweep)(
            model, lengths, repeats=repeats, decode_tokens=DECODE_TOKENS, progress=progress
        ),
        f"Press **Run the sweep** ({len(lengths)} prompt lengths × {repeats} runs, after a warm-up round).",
        where=c2,
    )
if sweep is None:
    st.stop()

flop_count = None if remote else FlopCount.of(model)
found = findings(sweep, flop_count)
chart_left, chart_right = layout.side_by_side(2)
with chart_left:
    chart(sweep_time_figure(sweep, layout.presenter()), width="stretch", key="pd_sweep_time")
    caption("measured", TEXT["time_caption"].format(repeats=sweep.repeats, decode=sweep.decode_tokens))
with chart_right:
    chart(sweep_rate_figure(sweep, found.saturation_tokens, layout.presenter()), width="stretch", key="pd_sweep_rate")
    caption("measured", TEXT["rate_caption"].format(saturation=SATURATION))

# -- 3. what this run says -------------------------------------------------------------
st.subheader("What these numbers say")
reply = crossover_prompt_tokens(sweep, int(timing.steps.shape[0]))
st.markdown(pd_text.measured_findings(sweep, found, reply, info.context))
if differ := pd_text.run_vs_sweep(timing, found.best_prefill_tokens_per_s, sweep.repeats):
    st.markdown(differ)

if flop_count is not None:
    with st.expander(f"Arithmetic per second: {TEXT['flops']}"):
        st.caption(glossary.note("GFLOP/s"))
        threads = torch.get_num_threads()  # machine.peak_flops measures (and keeps) one peak per torch thread count
        with st.spinner("Timing this CPU's fastest matrix product (once per server process)…"):
            peak = machine.peak_flops(next(model.parameters()).dtype)
        fits = machine.weights_vs_cache(info.weight_bytes)
        st.markdown(pd_text.flops_findings(found, flop_count, info, peak, threads, fits, machine.logical_cpus()))

big = next(m for m in load_public_models() if m["name"] == ILLUSTRATIVE_MODEL)
gpu = pd_text.illustrative_gpu(ILLUSTRATIVE_MODEL, weight_bytes(big["parameters"], 16), ILLUSTRATIVE_BANDWIDTH)
st.expander(f"On a GPU: {TEXT['gpu']}").markdown(gpu)
with st.expander(f"The sweep as a table: {TEXT['table']}"):
    st.dataframe(sweep.summary.round(2), hide_index=True, width="stretch", key="pd_sweep_table")
    caption("measured", TEXT["sweep_table"])
