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
from inference.lessons.kv_cache import text as kv_text
from inference.lessons.kv_cache.experiments import (
    cache_growth,
    compare_cache,
    engine_decode_step,
    layer_breakdown,
    with_cache_step,
)
from inference.lessons.kv_cache.figures import (
    cache_growth_figure,
    cumulative_time_figure,
    layer_bytes_figure,
    memory_figure,
    step_time_figure,
)
from inference.lessons.kv_cache.repetition import repeated_phrase
from inference.lessons.kv_cache.tables import TABLES, model_column_width

GROWTH_KEY = "kv_growth_run"
MAX_NEW_TOKENS = 300
DEFAULT_NEW_TOKENS = 200  # long enough for the no-cache cost to bend clearly upward, ~10 s to compare
TREND_STEPS = 21  # enough steps to compare the first ten with the last ten
CALCULATOR_DEFAULT_MODELS = [
    "GPT-2 (124M)",
    "Llama-3.2-1B",
    "Llama-3.1-8B",
    "Mistral-7B-v0.3",
    "Qwen2.5-7B",
    "Gemma-2-9B",
    "Llama-3.1-70B",
    "Mixtral-8x7B",
    "DeepSeek-V3",
]
CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]

limits = models.limits()
loaded = current_model(needs_weights="it reads the KV cache tensors the model fills as it runs")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info

st.title("🗄️ The KV cache")
st.markdown(kv_text.INTRO)

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
    growth, layers = cache_growth(trace), layer_breakdown(trace)

    st.markdown(kv_text.bytes_per_token(shape, info.dtype))
    last = growth.iloc[-1]
    m = layout.metric_cells(4)  # two rows of two, one a row in presenter mode: the byte counts stay whole
    m[0].metric(
        "Tokens in the cache",
        f"{last.cache_tokens:,}",
        help="After the last step's forward pass. The last chosen token is not in it yet: it is fed at the next step.",
    )
    m[1].metric("Measured from the tensors", f"{last.measured_bytes:,} B")
    m[2].metric("Formula", f"{last.formula_bytes:,} B")
    m[3].metric("Steps where they agree", f"{int(growth.agree.sum())} of {len(growth)}")

    chart_left, chart_right = layout.side_by_side(2)
    with chart_left:
        chart(cache_growth_figure(growth, layout.presenter()), width="stretch", key="kv_growth")
        caption("measured", kv_text.CAPTIONS["growth"])
    with chart_right:
        chart(layer_bytes_figure(layers, layout.presenter()), width="stretch", key="kv_layers")
        caption("measured", kv_text.layers_caption(last.cache_tokens))

    with st.expander(f"Every step as a table: {kv_text.SECTIONS['steps']}"):
        table = growth.rename(columns=kv_text.STEP_COLUMNS)
        bytes_column = st.column_config.NumberColumn(format="localized")
        st.dataframe(
            table,
            hide_index=True,
            width="stretch",
            key="kv_growth_table",
            column_config={"measured bytes": bytes_column, "formula bytes": bytes_column},
        )
        caption("measured", kv_text.CAPTIONS["table"])


def with_and_without() -> None:
    st.subheader("2. With and without the cache")
    st.markdown(kv_text.with_and_without_intro(new_tokens))
    comparison = measure_on_click(
        "Compare with and without the cache",
        "kv_compare",
        ("kv_compare", info.name, tuple(prepared.ids), new_tokens),
        lambda progress: compare_cache(model, prepared.ids, new_tokens, progress=progress),
        kv_text.compare_not_yet(new_tokens),
    )
    if comparison is not None:
        steps = comparison.steps
        m = layout.metric_cells(4)
        m[0].metric(f"Speed-up at {new_tokens} tokens", f"{comparison.speedup:.1f}×")
        m[1].metric("With cache", f"{steps.with_cache_cumulative_ms.iloc[-1] / 1e3:.2f} s")
        m[2].metric("Without cache", f"{steps.without_cache_cumulative_ms.iloc[-1] / 1e3:.2f} s")
        m[3].metric("Same tokens?", "yes ✓" if comparison.identical else "no ✗")
        growth_run = st.session_state.get(GROWTH_KEY)
        engine_step = engine_decode_step(growth_run[1]) if growth_run else None  # section 1's steps, as a Timing
        cached_step = with_cache_step(steps)
        chart_left, chart_right = layout.side_by_side(2)
        with chart_left:
            chart(step_time_figure(steps, layout.presenter()), width="stretch", key="kv_step_time")
            caption("measured", kv_text.step_time_caption(engine_step, cached_step))
        with chart_right:
            chart(
                cumulative_time_figure(steps, comparison.speedup, layout.presenter()),
                width="stretch",
                key="kv_cumulative",
            )
            caption("measured", kv_text.CAPTIONS["cumulative"])
        if len(steps) >= TREND_STEPS:
            first_steps, last_steps = steps.iloc[1:11], steps.iloc[-10:]  # step 0 is the prompt, the same both ways
            st.markdown(
                kv_text.trend(
                    info.name,
                    cached_step.median_ms,
                    first_steps.without_cache_ms.median(),
                    last_steps.without_cache_ms.median(),
                    int(last_steps.context_tokens.median()),
                    engine_step.median_ms if engine_step is not None else None,
                )
            )
        text = tokenizer.decode(comparison.tokens_with_cache, skip_special_tokens=False)
        if comparison.identical:
            st.success("Both ways chose exactly the same tokens: the cache changes the cost, not the result.")
        else:
            first = next(
                i
                for i, (a, b) in enumerate(zip(comparison.tokens_with_cache, comparison.tokens_without_cache))
                if a != b
            )
            st.error(kv_text.tokens_differ(first))
        st.caption("The continuation (with the cache):")
        st.code(text, language=None, wrap_lines=True)
        loop_link(comparison.tokens_with_cache)


def loop_link(generated_ids: list[int]) -> None:
    """If the greedy text loops, say so in one line and link to the repetition penalty."""
    phrase = repeated_phrase(generated_ids)
    if phrase is None:
        return
    st.markdown(kv_text.loop_note(phrase, tokenizer.decode(list(phrase.ids)), len(generated_ids)))
    st.page_link(
        "app_pages/generate.py",
        label="Generate: this prompt with a repetition penalty",
        icon="✍️",
        query_params={"prompt": st.session_state.kv_prompt[:1000], "t": "0", "rep": "1.2", "max": str(new_tokens)},
    )


def model_tables(memory) -> None:
    """The calculator's models as tables: attention, heads, KV and weight sizes."""
    small = st.column_config.NumberColumn

    model_width = model_column_width(memory.model)
    for key, columns in TABLES.items():
        st.dataframe(
            memory[["model", *columns]],
            hide_index=True,
            width="stretch",
            key=key,
            column_config={
                "model": st.column_config.TextColumn("model", width=model_width, pinned=True),
                "attention": st.column_config.TextColumn("type", width="small"),
                "attention_heads": small("heads", width="small", help="Query heads"),
                "kv_heads": small("KV heads", width="small"),
                "sliding_layers": small(
                    "windowed", width="small", help="Layers that keep at most their sliding window"
                ),
                "kv_gb": small("KV GB", format="%.3g", width="small"),
                "kv_gb_without_gqa": small(
                    "MHA KV GB",
                    format="%.3g",
                    width="small",
                    help="KV cache if every query head had its own K/V head (plain multi-head attention; for MLA, "
                    "the uncompressed per-head keys and values)",
                ),
                "gqa_saving": small("saving", format="%.1f×", width="small"),
                "weight_gb": small("weights GB", format="%.3g", width="small"),
                "kv_per_token_mb": small(
                    "MB/token", format="%.3g", width="small", help="KV cache added by one more token of one sequence"
                ),
            },
        )


def calculator() -> None:
    st.subheader("3. How big does it get for real models?")
    st.markdown(f"{kv_text.CALCULATOR_INTRO} {kv_text.at_this_model(info.dtype, shape.formula_bytes(512))}")
    public = load_public_models()
    this_model = model_entry_from_hf_config(model.config, f"{info.name} (this app)", info.parameters)
    by_name = {entry["name"]: entry for entry in [this_model, *public]}
    # presenter mode: the slider on its own row, the other two two a row (at 800 px "Precisio / n" broke mid-word)
    c = [st.container(), *st.columns(2)] if layout.presenter() else st.columns([2, 1, 1])
    context = c[0].select_slider(
        "Context length (tokens per sequence)",
        CONTEXTS,
        value=8192,
        key="kv_calc_context",
        persist_state="session",
        format_func=lambda n: f"{n:,}",
    )
    batch = c[1].number_input("Batch (sequences at once)", 1, 1024, 1, key="kv_calc_batch", persist_state="session")
    precision = c[2].selectbox(
        "Precision (weights and cache)",
        ["bfloat16", "float16", "float32", "float8", "int8", "int4"],
        key="kv_calc_precision",
        persist_state="session",
    )
    chosen = st.multiselect(
        "Models",
        list(by_name),
        [this_model["name"], *CALCULATOR_DEFAULT_MODELS],
        key="kv_calc_models",
        persist_state="session",
    )
    if not chosen:
        st.info("Pick at least one model.")
        return
    memory = kv_table([by_name[name] for name in chosen], context, int(batch), precision)
    chart(memory_figure(memory, layout.presenter()), width="stretch", key="kv_memory")
    caption("published", kv_text.calculator_caption(context, int(batch), precision))
    too_long = memory[memory.exceeds_context]["model"].tolist()
    if too_long:
        st.caption(f"⚠️ {context:,} tokens is beyond the context of: {', '.join(too_long)} (computed anyway).")

    grouped = memory[memory.attention == "GQA"]
    if len(grouped):
        biggest = grouped.loc[grouped.kv_gb_without_gqa.idxmax()]
        st.markdown(
            kv_text.gqa_saving(
                escape(biggest.model),
                biggest.attention_heads,
                biggest.kv_heads,
                kv_text.size_text(biggest.kv_gb),
                kv_text.size_text(biggest.kv_gb_without_gqa),
                biggest.gqa_saving,
            )
        )
    with st.expander(f"Every model as a table: {kv_text.SECTIONS['models']}"):
        model_tables(memory)
        caption("published", kv_text.CAPTIONS["public_table"])
    with st.expander(f"Sources and notes: {kv_text.SECTIONS['sources']}"):
        for entry in public:
            if entry["name"] in chosen:
                st.markdown(
                    f"- **{entry['name']}**: {entry['notes']} [config.json]({entry['source']['config_json']}). "
                    f"{entry['source']['parameter_count']}"
                )
        if this_model["name"] in chosen:
            st.markdown(
                f"- **{escape(this_model['name'])}**: its own config.json; parameters counted from the loaded weights."
            )


if prepared.error:
    st.warning(prepared.error)
else:
    step_by_step()
    with_and_without()
calculator()
