"""Quantization: the same model at 32, 16, 8 and 4 bits per weight — what it saves, what it costs."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from inference.core.calculator import DEFAULT_BITS, GB, load_accelerators, load_public_models, weight_bytes
from inference.core.prompting import model_kind, opening_prompt, prepare_prompt
from inference.core.quantize import PRECISIONS, int4_group_size
from inference.engines import llamacpp
from inference.lessons.engine_internals import kv_precision, served
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import figures as qf
from inference.lessons.quantization import gguf, rates
from inference.lessons.quantization import tables as qt
from inference.lessons.quantization import text as say
from inference.lessons.quantization.text import TEXT

DEFAULT_NEW_TOKENS = 48
loaded = current_model(needs_weights="it makes int8, int4 and bfloat16 copies of the weights and times them here")
model_key = st.session_state.get(models.MODEL_SOURCE_KEY, "") or "bundled"
presenter = layout.presenter()
name = loaded.info.name


def show_table(frame, key: str, spec: dict) -> None:
    """st.dataframe normally; in presenter mode an HTML table, whose text follows the presenter font size (the
    dataframe's canvas keeps ~8 px text on a projector at 800 px). `spec`: column -> (format, help)."""
    if presenter:
        st.table(frame.style.format(qt.text_formats(spec), na_rep="–").hide(axis="index"))
        return
    config = {
        c: st.column_config.TextColumn(help=h) if f == "text" else st.column_config.NumberColumn(format=f, help=h)
        for c, (f, h) in spec.items()
    }
    st.dataframe(frame, hide_index=True, key=key, column_config=config)


def show_gguf(result, key: str, last: str | None = None) -> None:
    """A GGUF measurement's table, caption and sentences, ending with `last` (by default f32's answer)."""
    frame = gguf.table(result)
    show_table(frame, key, gguf.COLUMNS)
    said = say.gguf_sentences(result, frame)
    caption("measured", said["caption"])
    st.markdown("\n\n".join((said["speed"], said["quality"], said["answer"] if last is None else last)))


@st.cache_data(show_spinner=False)
def public_fit_table():
    return qt.reserved_fit_table(load_public_models(), load_accelerators())


st.title("🗜️ Quantization: fewer bits per weight")
st.markdown(TEXT["intro"].format(model=name))

# -- 0. SmolLM2's GGUF files on llama-server (issue #45): the first screen holds the intro and this result ---------
st.subheader(f"{gguf.REAL}'s GGUF files on llama-server")
real_reason, real_result = gguf.unavailable_reason(), None
if real_reason:
    st.info(f"No rows here: {real_reason}")
else:
    real_result = measure_on_click(
        f"Measure the {len(gguf.REAL_TYPES)} GGUF types of {gguf.REAL}",
        "quant_real_gguf",
        ("real-gguf", gguf.REAL_TYPES, gguf.POSITIONS, gguf.DECODE_TOKENS),
        lambda progress: gguf.measure(progress=progress),
        "Each type runs on its own llama-server (about 30 s on an idle 2-core CPU; the first press also converts "
        "the f32, q8_0 and q4_K_M files, about 15 s).",
        background=True,
    )
    if real_result is not None:
        show_gguf(real_result, "quant_real_gguf_table")
with st.expander("Where these GGUF files come from"):
    st.markdown(TEXT["gguf_where"].format(model=gguf.REAL))

# -- the loaded model's bytes at each width, counted from its parameters: exact, at once ------------------------
st.subheader("Bytes at each width, counted from the weights")
bytes_frame, parameter_count = qt.bytes_table(loaded.model, name), qt.parameters(loaded.model)
bytes_sentence, bytes_caption = say.bytes_sentences(bytes_frame, parameter_count)
st.markdown(bytes_sentence)
show_table(bytes_frame, "quant_bytes", qt.BYTES_COLUMNS)
caption("exact", bytes_caption)
rates_box = st.expander(TEXT["rates_summary"])  # filled below, once the torch copies are known

# -- torch's own copies: made, timed and scored in the background (minutes on a 135M model) ---------------------
st.header("The same weights in PyTorch: four copies, timed and compared")
st.markdown(TEXT["torch_follows"])
opening = opening_prompt("compare", name)  # a request a chat model answers; a story start otherwise
left, right = (st.container(), st.container()) if presenter else st.columns([3, 1])
prompt = left.text_input("Prompt", opening.text, key=f"quant_prompt_{model_kind(name)}", persist_state="session")
new_tokens = right.slider("New tokens", 16, 96, DEFAULT_NEW_TOKENS, 8, key="quant_new_tokens", persist_state="session")
chat = opening.chat and loaded.info.has_chat_template
prepared = prepare_prompt(loaded.tokenizer, prompt, chat, loaded.info.context, models.limits())
for note in prepared.notes:
    st.info(note)
if prepared.error:
    st.warning(prepared.error)
    st.stop()
new_tokens = min(new_tokens, prepared.max_new_tokens)
model, tokenizer, prompt_ids = loaded.model, loaded.tokenizer, tuple(prepared.ids)  # read here: the thread reads no st
how_long = "a few seconds" if parameter_count < 50e6 else "several minutes on a busy 2-core CPU"
comparison = measure_on_click(
    "Quantize and compare the four precisions",
    "quant_torch",
    ("quant-torch", model_key, prompt_ids, new_tokens),
    lambda progress: qc.measure(model, tokenizer, prompt_ids, new_tokens, progress, shown_prompt=prompt),
    TEXT["torch_not_yet"].format(model=name, rounds=qc.SPEED_ROUNDS, how_long=how_long),
    background=True,
)
with rates_box:  # transformers, llama-server (the rates above, not measured again) and the bandwidth limit
    st.markdown(TEXT["rates_intro"])
    measured_rate = measure_on_click(
        TEXT["rates_button"],
        "quant_rates",
        ("decode-rates", model_key, rates.CONTEXT_TOKENS),
        lambda progress: rates.measure(loaded.model, name, progress),
        TEXT["rates_not_yet"].format(button=TEXT["rates_button"], model=name),
        background=True,
    )
    server_rows = real_result if name == gguf.REAL else None
    if measured_rate is not None:
        rates_frame = rates.table(measured_rate, server_rows, comparison)
        show_table(rates_frame, "quant_rates_table", rates.COLUMNS)
        said = say.rates_sentences(rates_frame, measured_rate, server_rows, comparison is not None)
        caption("measured", said["caption"])
        chart(qf.rates_bars(rates_frame, presenter), key="quant_rates_chart", text=said["chart"])
        st.markdown(said["gap"])
    if name != gguf.REAL:
        st.caption(TEXT["rates_other_model"].format(real=gguf.REAL))
    elif real_reason or real_result is None:
        st.caption(TEXT["rates_no_server"].format(reason=real_reason) if real_reason else TEXT["rates_server_later"])

if comparison is not None:
    summary = qc.summary_table(comparison)
    said = say.comparison_sentences(comparison, summary)
    # -- 1. cost ---------------------------------------------------------------------------------------------
    st.header("What each precision saves, and what it costs")
    show_table(qt.cost_table(summary), "quant_cost", qt.COST_COLUMNS)
    caption("measured", said["cost"])
    memory_col, speed_col = layout.side_by_side(2)
    with memory_col:
        chart(qf.memory_bars(comparison, presenter), key="quant_memory")
        caption("measured", said["memory"])
    with speed_col:
        chart(qf.speed_bars(summary, presenter), key="quant_speed")
        caption("measured", TEXT["speed_caption"])
    st.markdown(said["spread"])
    st.subheader("What these speeds mean")
    st.markdown("\n".join(f"- {finding}" for finding in say.speed_findings(comparison)))
    with st.expander("How each copy was made, and which layers stayed as they were"):
        st.markdown("\n".join(f"- {note}" for note in say.layer_notes(comparison)))
        st.markdown("\n\n".join(f"**{p}.** {TEXT[f'note {p}']}" for p in PRECISIONS))

    # -- 2. text ---------------------------------------------------------------------------------------------
    st.header("Same prompt, greedy decoding")
    st.markdown(TEXT["greedy_intro"])
    per_row, results = (2 if presenter else 4), list(comparison.results.values())  # presenter: two boxes a row
    for start in range(0, len(results), per_row):
        for column, result in zip(st.columns(per_row), results[start : start + per_row]):
            heading = f"{result.precision} — {say.departure(result)}"
            column.html(qf.greedy_text_html(heading, comparison.prompt_text, result, presenter))
    caption("exact", TEXT["greedy_caption"])

    # -- 3. quality ------------------------------------------------------------------------------------------
    st.header("How far each prediction drifts")
    st.markdown(TEXT["quality_intro"])
    show_table(qt.quality_table(summary), "quant_quality", qt.QUALITY_COLUMNS)
    caption("exact", said["quality"])
    chart(qf.kl_over_steps(comparison, presenter), key="quant_kl")
    caption("exact", TEXT["kl_caption"])
    disagreeing = comparison.steps.loc[~comparison.steps["top1_agrees"], "step"]
    last_step = len(comparison.reference_ids) - 1
    first = int(disagreeing.min()) if len(disagreeing) else 0
    help_step = "Starts at the first step where some precision's top token differs, if any."
    step_key = f"quant_step_{last_step}"
    step = st.slider("Step to inspect", 0, last_step, first, key=step_key, persist_state="session", help=help_step)
    st.html(qf.step_context_html(comparison, step, presenter))
    chart(qf.step_distributions(comparison, step, presenter), key="quant_step_bars")
    caption("exact", TEXT["step_caption"].format(n=int(comparison.step_tops["rank"].max()) - 1))

    # -- the loaded model's GGUF files: the same path as SmolLM2's above, on the page's prompt ---------------------
    with st.expander(TEXT["loaded_gguf_summary"]):  # closed: the first screens are the lesson (#46 item 11)
        st.markdown(TEXT["loaded_gguf_intro"])
        if not llamacpp.is_built():
            st.info(TEXT["loaded_gguf_not_built"])
        elif loaded.info.source not in ("bundled", "folder"):
            st.info("GGUF rows are made from the bundled model or a local model folder, not from a hub download.")
        else:
            source = None if loaded.info.source == "bundled" else st.session_state.get(models.MODEL_SOURCE_KEY) or None
            ids, positions, vocab = list(comparison.prompt_ids), len(comparison.reference_ids), model.config.vocab_size
            loaded_gguf = None
            try:
                loaded_gguf = measure_on_click(
                    "Measure the GGUF files",
                    "quant_gguf",
                    ("gguf", model_key, tuple(ids), positions),
                    lambda p: gguf.measure(ids, gguf.LOADED_TYPES, source, prompt, positions, progress=p, vocab=vocab),
                    "Press **Measure the GGUF files** (the first time converts the model: about half a minute).",
                    background=True,
                )
            except (gguf.EngineError, RuntimeError, OSError) as err:
                st.error(f"The GGUF rows could not be measured: {err}", icon="⚠️")
            if loaded_gguf:
                show_gguf(loaded_gguf, "quant_gguf_table", say.gguf_gap(comparison, loaded_gguf))

# -- the KV cache's number types, beside the weights' (the Inside-the-engine lesson's) --------------------------
with st.expander(TEXT["kv_summary"]):
    st.markdown(TEXT["kv_intro"])
    kv_width, kv_measured = loaded.info.kv_heads * loaded.info.head_dim, None
    if llamacpp.is_built() and loaded.info.source == "bundled":
        engine = served.engine_model(served.BUNDLED)
        kv_measured = measure_on_click(  # the same measurement, under the same key, as Inside the engine's section 3
            f"Measure the {len(kv_precision.CONFIGS)} KV cache types on llama-server",
            "quant_kv_measure",
            ("internals-kv", qt.KV_POSITIONS),
            lambda progress: kv_precision.compare(
                served.gguf(served.BUNDLED), engine.layers, engine.kv_width, qt.KV_POSITIONS, progress
            ),
            "KL and speed come from llama-server (about two minutes).",
            background=True,
        )
    kv_table = qt.kv_types_table(loaded.info.layers, kv_width, loaded.info.context, kv_measured and kv_measured.table)
    show_table(kv_table, "quant_kv_types", qt.KV_COLUMNS)
    kv = dict(model=name, layers=loaded.info.layers, width=kv_width, context=loaded.info.context)
    caption("exact", TEXT["kv_caption"].format(**kv))
    if kv_measured is not None:
        caption("measured", TEXT["kv_measured"].format(positions=kv_measured.positions, what=kv_measured.text_what))
    st.page_link("app_pages/engine-internals.py", label="KV cache types, measured: Inside the engine", icon="🔧")

# -- 4. will it fit --------------------------------------------------------------------------------------------
st.header("Will it fit? Weights of public models")
fit, cards = public_fit_table(), load_accelerators()
labels = [card.label for card in cards]
overhead = comparison.results["int4"].overhead.fraction if comparison is not None else None
fit_said = say.fit_sentences(fit, labels, overhead, int4_group_size(loaded.model), qt.RUNTIME_RESERVE_BYTES / GB)
st.markdown(fit_said["rule"])
chart(qf.fit_heatmap(fit, labels, presenter), key="quant_fit", text=fit_said["sentence"])
caption("published", fit_said["caption"])
# presenter: the verdict under the inputs (three columns broke "Paramet / ers" at 800 px)
calc_params, calc_bits, calc_result = [*st.columns(2), st.container()] if presenter else st.columns([2, 2, 3])
billions = calc_params.number_input(
    "Parameters (billions)", 0.01, 2000.0, 7.0, step=1.0, key="quant_calc_params", persist_state="session"
)
bits = calc_bits.segmented_control(
    "Bits per weight", DEFAULT_BITS, default=4, required=True, key="quant_calc_bits", persist_state="session"
)
needed = weight_bytes(round(billions * 1e9), bits)
holds, largest_needed = qt.smallest_card_after_reserve(needed, cards)  # the heatmap's rule, reserve kept
calc_result.metric(
    "Weight memory",
    f"{needed / GB:,.1f} GB",
    say.fits(holds, needed, largest_needed, cards[-1].label),
    help=TEXT["fits_help"],
    delta_color="normal" if holds else "inverse",
    delta_arrow="off",
)
with st.expander("The same numbers as a table"):
    show_table(qt.fit_display(fit), "quant_fit_table", qt.FIT_COLUMNS)
