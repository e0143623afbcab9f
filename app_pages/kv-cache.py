"""KV cache: what the model keeps between steps, what it costs, and what it saves."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.escaping import escape
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from inference.core.calculator import kv_table, load_public_models, model_entry_from_hf_config
from inference.core.kv_cache import KVShape
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.run import run_greedy
from inference.core.tokens import markdown_token_text
from inference.lessons.kv_cache import experiments, figures
from inference.lessons.kv_cache import text as kv_text
from inference.lessons.kv_cache.text import TEXT

GROWTH_KEY = "kv_growth_run"
MAX_NEW_TOKENS = 300
DEFAULT_NEW_TOKENS = 200  # long enough for the no-cache cost to bend clearly upward, ~10 s to compare
TREND_STEPS = 21  # enough steps to compare the first ten with the last ten
CALCULATOR_DEFAULT_MODELS = ["GPT-2 (124M)", "Llama-3.2-1B", "Llama-3.1-8B", "Mistral-7B-v0.3", "Qwen2.5-7B",
                             "Gemma-2-9B", "Llama-3.1-70B", "Mixtral-8x7B", "DeepSeek-V3"]  # fmt: skip
CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
TABLES = {  # three numbers a table at most: with the model column they fit the narrowest page (800 px)
    "kv_calc_shapes": ["attention", "attention_heads", "kv_heads"],
    "kv_calc_table": ["kv_gb", "kv_gb_without_gqa", "gqa_saving"],
    "kv_calc_sizes": ["sliding_layers", "kv_per_token_mb", "weight_gb"],
}

limits = models.limits()
loaded = current_model(needs_weights="it reads the KV cache tensors the model fills as it runs")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info

st.title("🗄️ The KV cache")
st.markdown(TEXT["intro"])

# Stacked in presenter mode: beside the prompt, projector-sized text broke "New / tokens" at 800 px.
left, right = (st.container(), st.container()) if layout.presenter() else st.columns([3, 1])
opening = opening_prompt("kv_cache", info.name).text
left.text_area("Prompt", opening, key="kv_prompt", persist_state="session", height=80, max_chars=20_000)
prepared = prepare_prompt(tokenizer, st.session_state.kv_prompt, False, info.context, limits)
for note in prepared.notes:
    st.info(note)
room = min(prepared.max_new_tokens, MAX_NEW_TOKENS)
if room >= 2:
    new_tokens = right.slider(
        "New tokens", 1, room, min(room, DEFAULT_NEW_TOKENS), key="kv_new_tokens", persist_state="session"
    )
else:
    new_tokens = room
    right.caption("The prompt fills the context: one new token fits.")
shape = KVShape.from_config(model.config, next(model.parameters()).dtype)


def step_by_step() -> None:
    st.subheader("1. The cache, step by step")
    run_key = (info.name, tuple(prepared.ids), new_tokens)
    if st.session_state.get(GROWTH_KEY, (None,))[0] != run_key:
        with generation_slot():
            st.session_state[GROWTH_KEY] = (run_key, run_greedy(model, tokenizer, prepared.ids, new_tokens))
    trace = st.session_state[GROWTH_KEY][1]
    growth, layers = experiments.cache_growth(trace), experiments.layer_breakdown(trace)

    st.markdown(TEXT["bytes_per_token"].format(s=shape, dtype=info.dtype, per_token=shape.bytes_per_token()))
    last = growth.iloc[-1]
    m = layout.metric_cells(4)  # two rows of two, one a row in presenter mode: the byte counts stay whole
    after = "After the last step's forward pass. The last chosen token is not in it yet: it is fed at the next step."
    m[0].metric("Tokens in the cache", f"{last.cache_tokens:,}", help=after)
    m[1].metric("Measured from the tensors", f"{last.measured_bytes:,} B")
    m[2].metric("Formula", f"{last.formula_bytes:,} B")
    m[3].metric("Steps where they agree", f"{int(growth.agree.sum())} of {len(growth)}")

    chart_left, chart_right = layout.side_by_side(2)
    with chart_left:
        chart(figures.cache_growth_figure(growth, layout.presenter()), width="stretch", key="kv_growth")
        caption("measured", TEXT["growth"])
    with chart_right:
        chart(figures.layer_bytes_figure(layers, layout.presenter()), width="stretch", key="kv_layers")
        caption("measured", TEXT["layers"].format(tokens=last.cache_tokens))

    with st.expander(f"Every step as a table: {TEXT['steps']}"):
        localized = st.column_config.NumberColumn(format="localized")
        config = {"measured bytes": localized, "formula bytes": localized}
        table = growth.rename(columns=kv_text.STEP_COLUMNS)
        st.dataframe(table, hide_index=True, width="stretch", key="kv_growth_table", column_config=config)
        caption("measured", TEXT["table"])


def with_and_without() -> None:
    st.subheader("2. With and without the cache")
    st.markdown(TEXT["with_and_without"].format(tokens=new_tokens))
    comparison = measure_on_click(
        "Compare with and without the cache",
        "kv_compare",
        ("kv_compare", info.name, tuple(prepared.ids), new_tokens),
        lambda progress: experiments.compare_cache(model, prepared.ids, new_tokens, progress=progress),
        TEXT["not_yet"].format(tokens=new_tokens),
    )
    if comparison is not None:
        steps = comparison.steps
        m = layout.metric_cells(4)
        m[0].metric(f"Speed-up at {new_tokens} tokens", f"{comparison.speedup:.1f}×")
        m[1].metric("With cache", f"{steps.with_cache_cumulative_ms.iloc[-1] / 1e3:.2f} s")
        m[2].metric("Without cache", f"{steps.without_cache_cumulative_ms.iloc[-1] / 1e3:.2f} s")
        m[3].metric("Same tokens?", "yes ✓" if comparison.identical else "no ✗")
        growth_run = st.session_state.get(GROWTH_KEY)
        engine_step = experiments.engine_decode_step(growth_run[1]) if growth_run else None  # section 1's steps
        cached = experiments.with_cache_step(steps)
        said = kv_text.comparison_sentences(comparison, info.name, cached, engine_step, TREND_STEPS)
        chart_left, chart_right = layout.side_by_side(2)
        with chart_left:
            chart(figures.step_time_figure(steps, layout.presenter()), width="stretch", key="kv_step_time")
            caption("measured", said["step_time"])
        with chart_right:
            cumulative = figures.cumulative_time_figure(steps, layout.presenter())
            chart(cumulative, width="stretch", key="kv_cumulative")
            caption("measured", TEXT["cumulative"])
        if "trend" in said:
            st.markdown(said["trend"])
        text = tokenizer.decode(comparison.tokens_with_cache, skip_special_tokens=False)
        if comparison.identical:
            st.success(TEXT["same_tokens"])
        else:
            pairs = zip(comparison.tokens_with_cache, steps.token_without_cache)
            st.error(TEXT["tokens_differ"].format(step=next(i for i, (a, b) in enumerate(pairs) if a != b)))
        st.caption("The continuation (with the cache):")
        st.code(text, language=None, wrap_lines=True)
        loop_link(comparison.tokens_with_cache)


def loop_link(generated_ids: list[int]) -> None:
    """If the greedy text loops, say so in one line and link to the repetition penalty."""
    loop = experiments.repeated_phrase(generated_ids)
    if loop is None:
        return
    phrase = markdown_token_text(repr(tokenizer.decode(list(loop[0])).strip()))
    st.markdown(TEXT["loop"].format(phrase=phrase, times=loop[1], tokens=len(generated_ids)))
    st.page_link(
        "app_pages/generate.py",
        label="Generate: this prompt with a repetition penalty",
        icon="✍️",
        query_params={"prompt": st.session_state.kv_prompt[:1000], "t": "0", "rep": "1.2", "max": str(new_tokens)},
    )


COLUMNS = {  # column: (header, number format or None for text, help)
    "attention": ("type", None, None),
    "attention_heads": ("heads", None, "Query heads"),
    "kv_heads": ("KV heads", None, None),
    "sliding_layers": ("windowed", None, "Layers that keep at most their sliding window"),
    "kv_gb": ("KV GB", "%.3g", None),
    "kv_gb_without_gqa": ("MHA KV GB", "%.3g", "KV cache if every query head had its own K/V head (plain multi-head "
                          "attention; for MLA, the uncompressed per-head keys and values)"),
    "gqa_saving": ("saving", "%.1f×", None),
    "weight_gb": ("weights GB", "%.3g", None),
    "kv_per_token_mb": ("MB/token", "%.3g", "KV cache added by one more token of one sequence"),
}  # fmt: skip


def model_tables(memory) -> None:
    """The calculator's models as three narrow tables: attention, heads, KV and weight sizes."""
    # The model column fits its longest name (about 6 px a character and 20 px of padding), but never pushes three
    # 75-px number columns past the narrowest table (456 px: 800 px wide, presenter mode; measured in Chromium).
    width = min(max(110, 20 + 6 * max(map(len, memory.model))), 456 - 3 * 75)
    config = {"model": st.column_config.TextColumn("model", width=width, pinned=True)}
    for column, (header, number, tip) in COLUMNS.items():
        kind = st.column_config.TextColumn if column == "attention" else st.column_config.NumberColumn
        config[column] = kind(header, width="small", help=tip, **({"format": number} if number else {}))
    for key, columns in TABLES.items():
        st.dataframe(memory[["model", *columns]], hide_index=True, width="stretch", key=key, column_config=config)


def calculator() -> None:
    st.subheader("3. How big does it get for real models?")
    st.markdown(TEXT["calculator"].format(tokens=512, dtype=info.dtype, bytes=shape.formula_bytes(512)))
    public = load_public_models()
    this_model = model_entry_from_hf_config(model.config, f"{info.name} (this app)", info.parameters)
    by_name = {entry["name"]: entry for entry in [this_model, *public]}
    # presenter mode: the slider on its own row, the other two two a row (at 800 px "Precisio / n" broke mid-word)
    c = [st.container(), *st.columns(2)] if layout.presenter() else st.columns([2, 1, 1])
    context = c[0].select_slider("Context length (tokens per sequence)", CONTEXTS, value=8192, key="kv_calc_context",
                                 persist_state="session", format_func=lambda n: f"{n:,}")  # fmt: skip
    batch = c[1].number_input("Batch (sequences at once)", 1, 1024, 1, key="kv_calc_batch", persist_state="session")
    precisions = ["bfloat16", "float16", "float32", "float8", "int8", "int4"]
    precision = c[2].selectbox("Precision (weights and cache)", precisions, key="kv_calc_precision",
                               persist_state="session")  # fmt: skip
    chosen = st.multiselect("Models", list(by_name), [this_model["name"], *CALCULATOR_DEFAULT_MODELS],
                            key="kv_calc_models", persist_state="session")  # fmt: skip
    if not chosen:
        st.info("Pick at least one model.")
        return
    memory = kv_table([by_name[name] for name in chosen], context, int(batch), precision)
    chart(figures.memory_figure(memory, layout.presenter()), width="stretch", key="kv_memory")
    caption("published", TEXT["calculator_caption"].format(context=context, batch=int(batch), precision=precision))
    too_long = memory[memory.exceeds_context]["model"].tolist()
    if too_long:
        st.caption(f"⚠️ {context:,} tokens is beyond the context of: {', '.join(too_long)} (computed anyway).")

    grouped = memory[memory.attention == "GQA"]
    if len(grouped):
        biggest = grouped.loc[grouped.kv_gb_without_gqa.idxmax()]
        st.markdown(TEXT["gqa_saving"].format(
            model=escape(biggest.model), heads=biggest.attention_heads, kv_heads=biggest.kv_heads,
            kv=figures.gb_text(biggest.kv_gb), without=figures.gb_text(biggest.kv_gb_without_gqa),
            saving=biggest.gqa_saving,
        ))  # fmt: skip
    with st.expander(f"Every model as a table: {TEXT['models']}"):
        model_tables(memory)
        caption("published", TEXT["public_table"])
    with st.expander(f"Sources and notes: {TEXT['sources']}"):
        notes = [f"- **{e['name']}**: {e['notes']} [config.json]({e['source']['config_json']}). "
                 f"{e['source']['parameter_count']}" for e in public if e["name"] in chosen]  # fmt: skip
        if this_model["name"] in chosen:
            notes.append(
                f"- **{escape(this_model['name'])}**: its own config.json; parameters counted from its weights."
            )
        st.markdown("\n".join(notes))


if prepared.error:
    st.warning(prepared.error)
else:
    step_by_step()
    with_and_without()
calculator()
