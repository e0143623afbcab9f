"""Inside the engine: the prefix cache, chunked prefill and its stalls, KV-cache precision, on a real llama-server."""

import streamlit as st

from app_pages.shared import layout
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import engine_errors
from inference.engines import llamacpp
from inference.lessons import glossary
from inference.lessons.engine_internals import chunked_prefill, kv_precision, prefix_cache, served, text
from inference.lessons.engine_internals.figures import (
    alternation_figure,
    kv_precision_figure,
    prefix_ttft_figure,
    stall_timeline_figure,
    stall_trade_figure,
)
from inference.lessons.serving.models import real_model_first

BATCH_SETTINGS = {
    "-b 64 -ub 64": (64, 64),
    "-b 128 -ub 128": (128, 128),
    "-b 256 -ub 256": (256, 256),
    "-b 512 -ub 512": (512, 512),
    "-b 512 -ub 64": (512, 64),
}
DEFAULT_PRICE, DEFAULT_DISCOUNT = 3.00, 90  # illustrative: the visitor types theirs

current_model()  # draws the shared sidebar
presenter = layout.presenter()

st.title("🔧 Inside the engine")
plan_box = st.container()  # what section 1 will ask of the engine, filled once its sliders are read
st.markdown(
    "Three mechanisms inside a serving engine decide what a request costs: the **prefix cache** (a prompt that "
    "starts like an earlier one skips that part of the prefill), **chunked prefill** (a long prompt is fed in "
    "pieces, and every request already decoding waits for each piece) and the **precision of the KV cache**. "
    "Each is measured here on llama.cpp's `llama-server`, started by the app for each measurement and stopped "
    "afterwards, and read from the server's own answers."
)
if not llamacpp.is_built():
    st.warning(
        "llama-server is not built. Build it once (about 5 minutes on 2 cores; the sources come from the Python "
        "package index) and reload this page:\n\n`python -m inference.engines llamacpp build`"
    )
    st.stop()

key = st.radio(
    "Model on the engine",
    # the app's default model first (the real SmolLM2 where it is the default)
    [served.MEMORY_BOUND, served.BUNDLED] if real_model_first() else [served.BUNDLED, served.MEMORY_BOUND],
    horizontal=True,
    key="internals_model",
    persist_state="session",
    format_func=lambda k: served.engine_model(k).label,
)
model = served.engine_model(key)
st.caption(
    f"{model.layers} layers, {model.kv_width} key and {model.kv_width} value numbers per layer per token, "
    f"{model.context:,} positions per slot, float32 weights."
    + (" Its text is nonsense; its timing is real." if model.timing_only else "")
)
if key != served.BUNDLED and key != served.REAL:
    st.caption(served.FALLBACK_NOTE)

# -- 1. the prefix cache ----------------------------------------------------------------------
st.subheader("1. The prefix cache")
st.markdown(text.PREFIX_INTRO)
st.caption(glossary.note("cache_n", "--cache-ram"))
c1, c2, c3 = layout.control_row(3)
prefix_tokens = c1.slider(
    "Shared prefix (tokens)",
    64,
    model.context - 64,
    min(512, model.context - 128),
    step=32,
    key="internals_prefix",
    persist_state="session",
)
suffix_tokens = c2.slider("Own tokens after it", 1, 64, 16, key="internals_suffix", persist_state="session")
requests = c3.slider("Requests", 2, 8, 4, key="internals_requests", persist_state="session")
with plan_box:
    plan = prefix_cache.request_plan(model.arithmetic, model.context, prefix_tokens, suffix_tokens, requests)
    st.markdown(text.plan_sentence(plan, model.name, served.prompt_start(key, prefix_tokens)))
    caption("exact", text.PLAN_CAPTION)
table = None
with engine_errors():
    table = measure_on_click(
        "Send them, cache off then on",
        key="internals_prefix_run",
        result_key=("internals-prefix", key, prefix_tokens, suffix_tokens, requests),
        measure=lambda progress: prefix_cache.shared_prefix(
            served.gguf(key), model.vocab, prefix_tokens, suffix_tokens, requests, progress, served.text_ids_for(key)
        ),
        not_yet="Nobody has sent these requests yet.",
        background=True,
    )
if table is not None:
    chart(prefix_ttft_figure(table, presenter), width="stretch")
    st.markdown(text.prefix_verdict(table))
    caption("measured", text.prefix_caption(served.prompt_opening(key, prefix_tokens)))
    warm = table[table["cache"] & (table["cached_tokens"] > 0)]
    if not warm.empty:
        cached, prompt = int(warm["cached_tokens"].iloc[0]), int(warm["prompt_tokens"].iloc[0])
        saved = prefix_cache.prefill_flops_saved(model.arithmetic, prompt, cached)
        st.markdown(text.flops_sentence(saved, prefix_cache.prefill_flops(model.arithmetic, prompt), cached))
        c1, c2 = st.columns(2)
        price = c1.number_input(
            "Input price, $ per million tokens",
            0.0,
            100.0,
            DEFAULT_PRICE,
            step=0.25,
            key="internals_price",
            persist_state="session",
        )
        discount = c2.slider(
            "Discount on cached input (%)", 0, 100, DEFAULT_DISCOUNT, key="internals_discount", persist_state="session"
        )
        on = table[table["cache"]]
        evaluated, reused = int(on["evaluated_tokens"].sum()), int(on["cached_tokens"].sum())
        full = prefix_cache.input_cost(evaluated + reused, 0, price, 0) * 1e6 / len(on)
        cheap = prefix_cache.input_cost(evaluated, reused, price, discount / 100) * 1e6 / len(on)
        st.markdown(text.billing_sentence(full, cheap, discount, reused, evaluated + reused))
        caption("exact", text.FLOPS_CAPTION)

st.markdown("#### What the server keeps")
st.markdown(
    "On this build a request goes to the idle slot that already holds the largest share of its prompt (above "
    f"{prefix_cache.SLOT_SIMILARITY:.0%}), else to the least recently used one. Beside the slots sits a **prompt "
    f"cache in RAM** (`--cache-ram`, MiB, {prefix_cache.DEFAULT_CACHE_RAM_MIB:,} by default): before a slot takes another prompt, its state is copied there, and the best-matching "
    "saved state is copied back; when it is full, the oldest is dropped. Two conversations take turns below on one "
    "slot (fewer slots than conversations) and on two."
)
c1, c2 = st.columns(2)
turn_tokens = c1.slider("New tokens per turn", 8, 64, 32, step=8, key="internals_turn", persist_state="session")
turns = c2.slider("Turns per conversation", 2, 4, 3, key="internals_turns", persist_state="session")
alt_prefix = min(prefix_tokens, model.context - turns * turn_tokens - 2)
alternation = None
with engine_errors():
    alternation = measure_on_click(
        "Alternate two conversations",
        key="internals_alternate",
        result_key=("internals-alternate", key, alt_prefix, turn_tokens, turns),
        measure=lambda progress: prefix_cache.alternating_conversations(
            served.gguf(key),
            model.vocab,
            model.layers,
            model.kv_width,
            alt_prefix,
            turn_tokens,
            turns,
            progress,
            served.text_ids_for(key),
        ),
        not_yet=f"Nobody has run two conversations ({alt_prefix:,}-token prefixes) yet.",
        background=True,
    )
if alternation is not None:
    chart(alternation_figure(alternation, presenter), width="stretch")
    st.markdown("\n".join(f"- {line}" for line in text.alternation_verdicts(alternation)))
    caption("measured", text.alternation_caption(alt_prefix, turn_tokens, served.text_ids_for(key) is not None))

# -- 2. chunked prefill -----------------------------------------------------------------------
st.subheader("2. Chunked prefill: a long prompt stalls everyone decoding")
st.markdown(
    "Each engine iteration is one batch: every decoding request adds its next token, then waiting prompts fill the "
    "batch up to `-b` tokens (the logical batch; `-ub`, the physical batch, only splits that work into pieces). "
    "Nobody gets a token before the iteration ends. So a prompt of P tokens arriving while N requests decode takes "
    "**ceil(P / (b − N))** iterations, and each decoding request waits through every one of them."
)
c1, c2, c3 = layout.control_row(3)
long_prompt = c1.slider(
    "Newcomer's prompt (tokens)",
    64,
    model.context - 16,
    min(768, model.context - 112),
    step=16,
    key="internals_long",
    persist_state="session",
)
cotenants = c2.slider("Requests decoding (co-tenants)", 1, 4, 2, key="internals_cotenants", persist_state="session")
chosen = c3.multiselect(
    "Batch settings",
    list(BATCH_SETTINGS),
    list(BATCH_SETTINGS)[:2] + ["-b 512 -ub 64"],
    key="internals_batches",
    persist_state="session",
    help=glossary.help_for("-b/-ub"),
)
settings = sorted({BATCH_SETTINGS[s] for s in chosen}, key=lambda s: (s[0], s[1]))
runs = None
if not settings:
    st.info("Pick at least one batch setting.")
with engine_errors():
    runs = settings and measure_on_click(
        "Measure the stalls",
        key="internals_stalls",
        result_key=("internals-stalls", key, long_prompt, cotenants, tuple(settings)),
        measure=lambda progress: chunked_prefill.sweep(
            served.gguf(key), model.vocab, model.context, long_prompt, settings, cotenants, progress
        ),
        not_yet="No stalls measured for these settings yet.",
        background=True,
    )
if runs:
    names = [f"-b {r.n_batch} -ub {r.n_ubatch}" for r in runs]
    shown = (
        st.selectbox("Timeline of", names, key="internals_timeline", persist_state="session")
        if len(runs) > 1
        else names[0]
    )
    run = runs[names.index(shown)]
    chart(stall_timeline_figure(run, presenter), width="stretch")
    st.markdown(text.stall_verdict(run))
    caption(
        "measured",
        f"{run.cotenants} co-tenants stream long greedy replies from a server with {run.cotenants + 1} slots; after "
        f"{chunked_prefill.WARM_TOKENS} tokens each, a {run.prompt_tokens:,}-token prompt is sent asking for one "
        "token. Every token's arrival is timestamped here; a stall is a co-tenant token that arrived during the "
        "newcomer's prefill as the server timed it. Predicted: ceil(P / (b − N)), from the server's source.",
    )
    sweep = chunked_prefill.sweep_table(runs)
    if len(runs) > 1:
        chart(stall_trade_figure(sweep, presenter), width="stretch")
        st.markdown(text.sweep_verdict(sweep))
    st.dataframe(
        sweep.drop(columns=["n_batch", "n_ubatch"]).round(1),
        hide_index=True,
        column_config={"stalls_issue_formula": st.column_config.NumberColumn("ceil(P / b)")},
    )
    caption("measured", "One run per setting on a fresh server; the machine is shared, so times move between runs.")

# -- 3. KV-cache precision --------------------------------------------------------------------
st.subheader("3. KV-cache precision")
st.markdown(text.KV_TYPES_INTRO)
st.page_link("app_pages/quantization.py", label="Weight quantization: bytes, speed and KL", icon="🗜️")
bundled = served.engine_model(served.BUNDLED)  # trained: its distributions mean something
positions = st.slider(
    "Positions of text scored", 32, 300, 192, step=16, key="internals_positions", persist_state="session"
)
comparison = None
with engine_errors():
    comparison = measure_on_click(
        f"Compare {len(kv_precision.CONFIGS)} cache types on the bundled model",
        key="internals_kv",
        result_key=("internals-kv", positions),
        measure=lambda progress: kv_precision.compare(
            served.gguf(served.BUNDLED), bundled.layers, bundled.kv_width, positions, progress
        ),
        not_yet="No cache types compared yet.",
        background=True,
    )
if comparison is not None:
    kv = comparison.table
    chart(kv_precision_figure(kv, presenter), width="stretch")
    st.markdown(text.kv_verdict(kv, comparison.positions, comparison.text_what, bundled.context))
    st.dataframe(
        kv[
            [
                "cache",
                "bytes_per_token",
                "reported_bytes_per_token",
                "mean_kl_vs_f32",
                "top1_agreement_vs_f32",
                "mean_kl_vs_f16_flash",
                "decode_tokens_per_s",
            ]
        ],
        hide_index=True,
        column_config={
            "bytes_per_token": st.column_config.NumberColumn("bytes/token (formula)", format="%d"),
            "reported_bytes_per_token": st.column_config.NumberColumn("bytes/token (server)", format="%.1f"),
            "mean_kl_vs_f32": st.column_config.NumberColumn("mean KL vs f32", format="%.2e"),
            "top1_agreement_vs_f32": st.column_config.NumberColumn("same top-1", format="percent"),
            "mean_kl_vs_f16_flash": st.column_config.NumberColumn("mean KL vs f16+FA", format="%.2e"),
            "decode_tokens_per_s": st.column_config.NumberColumn("decode tok/s", format="%.0f"),
        },
    )
    caption(
        "measured",
        f"Bytes per token computed exactly from each type's block layout (q8_0: 34 bytes per 32 values, q4_0: 18) "
        "beside what the server reports allocating (its `llama_kv_cache` line). KL and top-1 measured over "
        f"{comparison.positions:,} positions of {comparison.text_what}, each position's whole {bundled.vocab:,}-token "
        "distribution from the server, against f32 keys and values without flash attention. Decode: the "
        f"median of {kv_precision.DECODE_RUNS} greedy runs of {kv_precision.DECODE_TOKENS} tokens (server timings), "
        "on a shared machine.",
    )
