"""Quantization: the same model at 32, 16, 8 and 4 bits per weight — what it saves, what it costs."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from inference.core.calculator import DEFAULT_BITS, GB, load_accelerators, load_public_models, weight_bytes
from inference.core.prompting import model_kind, opening_prompt, prepare_prompt
from inference.core.quantize import PRECISIONS
from inference.engines import llamacpp
from inference.lessons.engine_internals import kv_precision, served
from inference.lessons.quantization import columns as qcol
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import figures as qf
from inference.lessons.quantization import first_screen, rates, real_gguf
from inference.lessons.quantization import fit as qfit
from inference.lessons.quantization import gguf as gguf_compare
from inference.lessons.quantization import text as qt
from inference.lessons.quantization import text_memory as qm
from inference.lessons.quantization import text_rates as rt
from inference.lessons.quantization.figures_rates import rates_bars
from inference.lessons.quantization.kv_types import KV_FORMATS, KV_POSITIONS, KV_TEXT_FORMATS, kv_types_table

DEFAULT_NEW_TOKENS = 48


def show_table(frame, key: str, column_config: dict, presenter_formats: dict) -> None:
    """st.dataframe normally; in presenter mode an HTML table, whose text follows the presenter font size (the
    dataframe's canvas keeps ~8 px text on a projector at 800 px)."""
    if presenter:
        st.table(frame.style.format(presenter_formats, na_rep="–").hide(axis="index"))
    else:
        st.dataframe(frame, hide_index=True, width="stretch", key=key, column_config=column_config)


def columns(spec: dict) -> dict:
    """Streamlit's column configs from a lesson's plain column specs (format, help)."""
    return {
        c: st.column_config.TextColumn(help=h) if f == "text" else st.column_config.NumberColumn(format=f, help=h)
        for c, (f, h) in spec.items()
    }


@st.cache_data(show_spinner=False)
def public_fit_table():
    return qfit.reserved_fit_table(load_public_models(), load_accelerators(), DEFAULT_BITS)


loaded = current_model(needs_weights="it makes int8, int4 and bfloat16 copies of the weights and times them here")
model_key = st.session_state.get(models.MODEL_SOURCE_KEY, "") or "bundled"
presenter = layout.presenter()

st.title("🗜️ Quantization: fewer bits per weight")
st.markdown(qt.intro(loaded.info.name))

# -- 0. the real model's GGUF files on llama-server (issue #45), measured in the background: the first screen holds
# the intro and this button or its kept result (#46: at 800 px in presenter mode too)
st.subheader(f"{real_gguf.real_model.REAL_MODEL_NAME}'s GGUF files on llama-server")
real_reason, real_result = real_gguf.unavailable_reason(), None
if real_reason:
    st.info(f"No rows here: {real_reason}")
else:
    real_result = measure_on_click(
        f"Measure the {len(real_gguf.REAL_TYPES)} GGUF types of {real_gguf.real_model.REAL_MODEL_NAME}",
        "quant_real_gguf",
        ("real-gguf", real_gguf.REAL_TYPES, real_gguf.POSITIONS, real_gguf.DECODE_TOKENS),
        lambda progress: real_gguf.measure(progress=progress),
        "Each type runs on its own llama-server (about 30 s on an idle 2-core CPU; the first press also converts "
        "the f32, q8_0 and q4_K_M files, about 15 s).",
        background=True,
    )
    if real_result is not None:
        real_table = real_gguf.table(real_result)
        real_formats = columns(qcol.plain(real_gguf.TABLE_FORMATS))
        show_table(real_table, "quant_real_gguf_table", real_formats, real_gguf.TABLE_TEXT_FORMATS)
        caption("measured", real_gguf.caption(real_result))
        st.markdown(real_gguf.speed_sentence(real_table))
        st.markdown(real_gguf.quality_sentence(real_table))
        st.markdown(real_gguf.answer_sentence(real_result))
with st.expander("Where these GGUF files come from"):
    st.markdown(real_gguf.INTRO)
# -- the loaded model's bytes at each width, counted from its parameters: exact, at once
st.subheader("Bytes at each width, counted from the weights")
bytes_frame = first_screen.bytes_table(loaded.model, loaded.info.name)
parameter_count = first_screen.parameters(loaded.model)
st.markdown(first_screen.bytes_sentence(bytes_frame, loaded.info.name, parameter_count))
show_table(bytes_frame, "quant_bytes", columns(qcol.plain(first_screen.FORMATS)), first_screen.TEXT_FORMATS)
caption("exact", first_screen.caption(parameter_count, len(bytes_frame) > len(first_screen.WIDTHS)))
rates_box = st.expander(rt.SUMMARY)  # decode rates three ways (#45): filled below, once the torch copies are known

# -- torch's own copies: made, timed and scored in the background (minutes on a 135M model) -------------
st.header("The same weights in PyTorch: four copies, timed and compared")
st.markdown(real_gguf.TORCH_FOLLOWS)
opening = opening_prompt("compare", loaded.info.name)  # a request a chat model answers; a story start otherwise
kind = model_kind(loaded.info.name)
left, right = (st.container(), st.container()) if presenter else st.columns([3, 1])  # "New / tokens" wrapped
prompt = left.text_input("Prompt", opening.text, key=f"quant_prompt_{kind}", persist_state="session")
new_tokens = right.slider(
    "New tokens", 16, 96, DEFAULT_NEW_TOKENS, step=8, key="quant_new_tokens", persist_state="session"
)
chat = opening.chat and loaded.info.has_chat_template
prepared = prepare_prompt(loaded.tokenizer, prompt, chat, loaded.info.context, models.limits())
for note in prepared.notes:
    st.info(note)
if prepared.error:
    st.warning(prepared.error)
    st.stop()
new_tokens = min(new_tokens, prepared.max_new_tokens)
model, tokenizer, prompt_ids = loaded.model, loaded.tokenizer, tuple(prepared.ids)  # read here: the thread reads no st
comparison = measure_on_click(
    "Quantize and compare the four precisions",
    "quant_torch",
    ("quant-torch", model_key, prompt_ids, new_tokens),
    lambda progress: qc.measure(model, tokenizer, prompt_ids, new_tokens, progress, shown_prompt=prompt),
    first_screen.torch_not_yet(loaded.info.name, parameter_count, qc.SPEED_ROUNDS),
    background=True,
)
with rates_box:  # transformers, llama-server (the rates above, not measured again) and the bandwidth limit
    st.markdown(rt.INTRO)
    rate = measure_on_click(
        rt.BUTTON,
        "quant_rates",
        ("decode-rates", model_key, rates.CONTEXT_TOKENS),
        lambda progress: rates.measure(loaded.model, loaded.info.name, progress),
        rt.not_yet(loaded.info.name),
        background=True,
    )
    server_rows = real_result if loaded.info.name == real_gguf.real_model.REAL_MODEL_NAME else None
    if rate is not None:
        rates_frame = rates.table(rate, server_rows, comparison)
        show_table(rates_frame, "quant_rates_table", columns(rates.COLUMNS), rates.TEXT_FORMATS)
        caption("measured", rt.caption(rate, server_rows, comparison is not None))
        chart(rates_bars(rates_frame, presenter), key="quant_rates_chart", text=rt.chart_text(rates_frame))
        st.markdown(rt.gap_sentence(rates_frame, rate, server_rows))
    if missing := rt.no_server_rows(loaded.info.name, real_gguf.real_model.REAL_MODEL_NAME, real_reason, real_result):
        st.caption(missing)


def show_comparison(comparison) -> None:
    """Sections 1-3 and the bundled model's GGUF rows, from a finished torch comparison."""
    summary = qc.summary_table(comparison)
    # -- 1. cost ------------------------------------------------------------------------------
    st.header("What each precision saves, and what it costs")
    show_table(qf.cost_for_display(summary), "quant_cost", columns(qcol.COST), qf.COST_FORMATS)
    caption("measured", qt.cost_caption(len(comparison.reference_ids), comparison.rounds))

    memory_col, speed_col = layout.side_by_side(2)
    with memory_col:
        chart(qf.memory_bars(comparison, presenter), width="stretch", key="quant_memory")
        int4_shrink = comparison.results["float32"].weight_bytes / comparison.results["int4"].weight_bytes
        caption("measured", qt.memory_caption(int4_shrink))
    with speed_col:
        chart(qf.speed_bars(summary, presenter), width="stretch", key="quant_speed")
        caption("measured", qt.SPEED_CAPTION)
    st.markdown(qt.speed_spread(summary))

    st.subheader("What these speeds mean")
    st.markdown("\n".join(f"- {finding}" for finding in qt.speed_findings(comparison)))
    with st.expander("How each copy was made, and which layers stayed as they were"):
        st.markdown("\n".join(f"- {note}" for note in qt.layer_notes(comparison)))
        for precision in PRECISIONS:
            st.markdown(f"**{precision}.** {qt.SPEED_NOTES[precision]}")

    # -- 2. text ------------------------------------------------------------------------------
    st.header("Same prompt, greedy decoding")
    st.markdown(qt.GREEDY_INTRO)
    per_row = 2 if presenter else 4  # presenter text is large: two boxes per row
    results = list(comparison.results.values())
    for start in range(0, len(results), per_row):
        for column, result in zip(st.columns(per_row), results[start : start + per_row]):
            with column:
                heading = f"{result.precision} — {qt.departure_verdict(result)}"
                st.html(
                    qf.greedy_text_html(
                        heading, comparison.prompt_text, result.greedy_tokens, result.first_departure, presenter
                    )
                )
    caption("exact", "Greedy (temperature 0) output of each copy: deterministic, so a rerun gives the same text.")

    # -- 3. quality -----------------------------------------------------------------------------
    st.header("How far each prediction drifts")
    st.markdown(qt.QUALITY_INTRO)
    show_table(qf.quality_for_display(summary), "quant_quality", columns(qcol.QUALITY), qf.QUALITY_FORMATS)
    caption("exact", qt.quality_caption(len(comparison.reference_ids)))
    chart(qf.kl_over_steps(comparison, presenter), width="stretch", key="quant_kl")
    caption("exact", qt.KL_CAPTION)

    steps = comparison.steps
    disagreeing = steps.loc[~steps["top1_agrees"], "step"]
    last_step = len(comparison.reference_ids) - 1
    step = st.slider(
        "Step to inspect",
        0,
        last_step,
        int(disagreeing.min()) if len(disagreeing) else 0,
        key=f"quant_step_{last_step}",
        persist_state="session",
        help="Starts at the first step where some precision's top token differs, if any.",
    )
    st.html(qf.step_context_html(comparison, step, presenter))
    chart(qf.step_distributions(comparison, step, presenter), width="stretch", key="quant_step_bars")
    top_n = int(comparison.step_tops["rank"].max()) - 1  # the last rank is "other"
    caption("exact", qt.step_caption(top_n))

    # -- GGUF: the files people download for llama.cpp ------------------------------------------
    with st.expander(qt.GGUF_SUMMARY):  # closed: the first screens are the lesson (#46 item 11)
        st.markdown(qt.GGUF_INTRO)
        if not gguf_compare.available():
            st.info(qt.GGUF_NOT_BUILT)
        elif loaded.info.source not in ("bundled", "folder"):
            st.info("GGUF rows are made from the bundled model or a local model folder, not from a hub download.")
        else:
            gguf_source = (
                None if loaded.info.source == "bundled" else st.session_state.get(models.MODEL_SOURCE_KEY) or None
            )
            gguf_results, ids = None, (comparison.prompt_ids, comparison.reference_ids)
            try:
                gguf_results = measure_on_click(
                    "Measure the GGUF files",
                    "quant_gguf",
                    ("gguf", model_key, tuple(comparison.prompt_ids), tuple(comparison.reference_ids)),
                    lambda progress: gguf_compare.measure_ggufs(
                        loaded.model, *ids, source=gguf_source, progress=progress
                    ),
                    "Press **Measure the GGUF files** (the first time converts the model: about half a minute).",
                    background=True,
                )
            except (gguf_compare.EngineError, RuntimeError, OSError) as err:
                st.error(f"The GGUF rows could not be measured: {err}", icon="⚠️")
            if gguf_results:
                gguf_frame = gguf_compare.side_by_side(summary, gguf_compare.gguf_table(gguf_results))
                show_table(gguf_frame, "quant_gguf_table", columns(qcol.plain(qf.GGUF_FORMATS)), qf.GGUF_TEXT_FORMATS)
                caption("measured", qt.gguf_caption(gguf_compare.SPEED_ROUNDS))
                st.markdown(qt.gguf_speed_gap(comparison, gguf_results))


if comparison is not None:
    show_comparison(comparison)

# -- the KV cache's number types, beside the weights' (the Inside-the-engine lesson's) ----------
with st.expander(qm.KV_TYPES_SUMMARY):
    st.markdown(qm.KV_TYPES_INTRO)
    kv_width = loaded.info.kv_heads * loaded.info.head_dim
    kv_measured = None
    if llamacpp.is_built() and loaded.info.source == "bundled":
        bundled_engine = served.engine_model(served.BUNDLED)
        kv_measured = measure_on_click(  # the same measurement, under the same key, as Inside the engine's section 3
            f"Measure the {len(kv_precision.CONFIGS)} KV cache types on llama-server",
            "quant_kv_measure",
            ("internals-kv", KV_POSITIONS),
            lambda progress: kv_precision.compare(
                served.gguf(served.BUNDLED), bundled_engine.layers, bundled_engine.kv_width, KV_POSITIONS, progress
            ),
            "KL and speed come from llama-server (about two minutes).",
            background=True,
        )
    kv_table = kv_types_table(loaded.info.layers, kv_width, loaded.info.context, kv_measured and kv_measured.table)
    show_table(kv_table, "quant_kv_types", columns(qcol.plain(KV_FORMATS)), KV_TEXT_FORMATS)
    caption("exact", qm.kv_types_caption(loaded.info.name, loaded.info.layers, kv_width, loaded.info.context))
    if kv_measured is not None:
        caption("measured", qm.kv_measured_caption(kv_measured.positions, kv_measured.text_what))
    st.page_link("app_pages/engine-internals.py", label="KV cache types, measured: Inside the engine", icon="🔧")


# -- 4. calculator --------------------------------------------------------------------------
st.header("Will it fit? Weights of public models")
reserve_gb = qfit.RUNTIME_RESERVE_BYTES / GB
FORMAT_LOCALIZED = st.column_config.NumberColumn(format="localized")
st.markdown(qm.fit_rule(reserve_gb, qfit.RUNTIME_RESERVE_WHAT))
fit = public_fit_table()
cards = load_accelerators()
labels = [card.label for card in cards]
chart(qf.fit_heatmap(fit, labels, presenter), width="stretch", key="quant_fit", text=qm.fit_sentence(fit))
int4_overhead = comparison.results["int4"].overhead.fraction if comparison is not None else None
caption("published", qm.fit_caption(labels, int4_overhead, qc.int4_group_size(loaded.model), reserve_gb))

# presenter: the verdict under the inputs (three columns broke "Paramet / ers" at 800 px)
calc_params, calc_bits, calc_result = [*st.columns(2), st.container()] if presenter else st.columns([2, 2, 3])
billions = calc_params.number_input(
    "Parameters (billions)", 0.01, 2000.0, 7.0, step=1.0, key="quant_calc_params", persist_state="session"
)
bits = calc_bits.segmented_control(
    "Bits per weight", DEFAULT_BITS, default=4, required=True, key="quant_calc_bits", persist_state="session"
)
needed = weight_bytes(round(billions * 1e9), bits)
holds, largest_needed = qfit.smallest_card_after_reserve(needed, cards)  # the heatmap's rule, reserve kept
calc_result.metric(
    "Weight memory",
    f"{needed / GB:,.1f} GB",
    qm.fits(holds, needed, largest_needed, cards[-1].label),
    help=qm.FITS_HELP,
    delta_color="normal" if holds else "inverse",
    delta_arrow="off",
)
with st.expander("The same numbers as a table"):
    show_table(qf.fit_for_display(fit), "quant_fit_table", {"parameters": FORMAT_LOCALIZED}, qf.FIT_FORMATS)
