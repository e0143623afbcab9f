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
from inference.lessons.engine_internals.text import TEXT
from inference.lessons.serving import models

BATCH_SETTINGS = {f"-b {b} -ub {u}": (b, u) for b, u in ((64, 64), (128, 128), (256, 256), (512, 512), (512, 64))}
DEFAULT_PRICE, DEFAULT_DISCOUNT = 3.00, 90  # illustrative: the visitor types theirs
KV_COLUMNS = {  # beside the "cache" column
    "bytes_per_token": st.column_config.NumberColumn("bytes/token (formula)", format="%d"),
    "reported_bytes_per_token": st.column_config.NumberColumn("bytes/token (server)", format="%.1f"),
    "mean_kl_vs_f32": st.column_config.NumberColumn("mean KL vs f32", format="%.2e"),
    "top1_agreement_vs_f32": st.column_config.NumberColumn("same top-1", format="percent"),
    "mean_kl_vs_f16_flash": st.column_config.NumberColumn("mean KL vs f16+FA", format="%.2e"),
    "decode_tokens_per_s": st.column_config.NumberColumn("decode tok/s", format="%.0f"),
}

current_model()  # draws the shared sidebar
presenter = layout.presenter()

st.title("🔧 Inside the engine")
plan_box = st.container()  # what section 1 will ask of the engine, filled once its sliders are read
st.markdown(TEXT["intro"])
if not llamacpp.is_built():
    st.warning(TEXT["no_build"])
    st.stop()

options, label = models.model_options(), models.LABELS.get  # the app's default model first
key = st.radio(
    "Model on the engine", options, horizontal=True, key="internals_model", format_func=label, persist_state="session"
)
model = served.engine_model(key)
about = TEXT["model"].format(layers=model.layers, kv_width=model.kv_width, context=model.context)
st.caption(about + (" " + TEXT["timing_only"] if model.timing_only else ""))
if key not in (served.BUNDLED, served.REAL):
    st.caption(served.FALLBACK_NOTE)

# -- 1. the prefix cache ----------------------------------------------------------------------
st.subheader("1. The prefix cache")
st.markdown(TEXT["prefix_intro"])
st.caption(glossary.note("cache_n", "--cache-ram"))
c1, c2, c3 = layout.control_row(3)
prefix_default = min(512, model.context - 128)
prefix_tokens = c1.slider(
    "Shared prefix (tokens)",
    64,
    model.context - 64,
    prefix_default,
    32,
    key="internals_prefix",
    persist_state="session",
)
suffix_tokens = c2.slider("Own tokens after it", 1, 64, 16, key="internals_suffix", persist_state="session")
requests = c3.slider("Requests", 2, 8, 4, key="internals_requests", persist_state="session")
with plan_box:
    plan = prefix_cache.request_plan(model.arithmetic, model.context, prefix_tokens, suffix_tokens, requests)
    st.markdown(text.plan_sentence(plan, model.name, prefix_cache.prompt_start(model, prefix_tokens)))
    caption("exact", TEXT["plan_caption"])
table = None
with engine_errors():
    table = measure_on_click(
        "Send them, cache off then on",
        key="internals_prefix_run",
        result_key=("internals-prefix", key, prefix_tokens, suffix_tokens, requests),
        measure=lambda progress: prefix_cache.shared_prefix(model, prefix_tokens, suffix_tokens, requests, progress),
        not_yet="Nobody has sent these requests yet.",
        background=True,
    )
if table is not None:
    chart(prefix_ttft_figure(table, presenter))
    st.markdown(text.prefix_verdict(table))
    opening = prefix_cache.prompt_opening(model, prefix_tokens)
    prompts = TEXT["prompts_real"].format(opening=opening) if opening else TEXT["prompts_filler"]
    caption("measured", TEXT["prefix_caption"].format(prompts=prompts))
    warm = table[table["cache"] & (table["cached_tokens"] > 0)]
    if not warm.empty:
        cached, prompt = int(warm["cached_tokens"].iloc[0]), int(warm["prompt_tokens"].iloc[0])
        saved = prefix_cache.prefill_flops_saved(model.arithmetic, prompt, cached)
        cold = prefix_cache.prefill_flops(model.arithmetic, prompt)
        st.markdown(TEXT["flops"].format(cached=cached, saved=saved / 1e9, cold=cold / 1e9, share=saved / cold))
        c1, c2 = st.columns(2)
        price = c1.number_input(
            "Input price, $ per million tokens",
            0.0,
            100.0,
            DEFAULT_PRICE,
            0.25,
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
        bill = dict(full=full, cheap=cheap, discount=discount, reused=reused, total=evaluated + reused)
        st.markdown(TEXT["billing"].format(**bill))
        caption("exact", TEXT["flops_caption"])

st.markdown("#### What the server keeps")
keeps = dict(similarity=prefix_cache.SLOT_SIMILARITY, default=prefix_cache.DEFAULT_CACHE_RAM_MIB)
st.markdown(TEXT["keeps"].format(**keeps))
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
            model, alt_prefix, turn_tokens, turns, progress
        ),
        not_yet=f"Nobody has run two conversations ({alt_prefix:,}-token prefixes) yet.",
        background=True,
    )
if alternation is not None:
    chart(alternation_figure(alternation, presenter))
    st.markdown("\n".join(f"- {line}" for line in text.alternation_lines(alternation)))
    said = " of real English" if key == served.REAL else ""
    caption("measured", TEXT["alternation_caption"].format(prefix=alt_prefix, said=said, turn=turn_tokens))

# -- 2. chunked prefill -----------------------------------------------------------------------
st.subheader("2. Chunked prefill: a long prompt stalls everyone decoding")
st.markdown(TEXT["chunked_intro"])
c1, c2, c3 = layout.control_row(3)
long_default = min(768, model.context - 112)
long_prompt = c1.slider(
    "Newcomer's prompt (tokens)",
    64,
    model.context - 16,
    long_default,
    16,
    key="internals_long",
    persist_state="session",
)
cotenants = c2.slider("Requests decoding (co-tenants)", 1, 4, 2, key="internals_cotenants", persist_state="session")
batches, explain = list(BATCH_SETTINGS), glossary.help_for("-b/-ub")
chosen = c3.multiselect(
    "Batch settings",
    batches,
    batches[:2] + batches[-1:],
    key="internals_batches",
    help=explain,
    persist_state="session",
)
settings = sorted({BATCH_SETTINGS[s] for s in chosen})
runs = None
if not settings:
    st.info("Pick at least one batch setting.")
with engine_errors():
    runs = settings and measure_on_click(
        "Measure the stalls",
        key="internals_stalls",
        result_key=("internals-stalls", key, long_prompt, cotenants, tuple(settings)),
        measure=lambda progress: chunked_prefill.sweep(model, long_prompt, settings, cotenants, progress),
        not_yet="No stalls measured for these settings yet.",
        background=True,
    )
if runs:
    names = [r.setting for r in runs]
    shown = (
        st.selectbox("Timeline of", names, key="internals_timeline", persist_state="session")
        if len(runs) > 1
        else names[0]
    )
    run = runs[names.index(shown)]
    chart(stall_timeline_figure(run, presenter))
    st.markdown(text.stall_verdict(run))
    stall_fields = dict(cotenants=run.cotenants, slots=run.cotenants + 1, warm=chunked_prefill.WARM_TOKENS)
    caption("measured", TEXT["stall_caption"].format(prompt=run.prompt_tokens, **stall_fields))
    sweep = chunked_prefill.sweep_table(runs)
    if len(runs) > 1:
        chart(stall_trade_figure(sweep, text.trade_title(runs), presenter))
        st.markdown(text.sweep_verdict(sweep))
    ceil_p_b = {"stalls_issue_formula": st.column_config.NumberColumn("ceil(P / b)")}
    st.dataframe(sweep.round(1), hide_index=True, column_config=ceil_p_b)
    caption("measured", "One run per setting on a fresh server; the machine is shared, so times move between runs.")

# -- 3. KV-cache precision --------------------------------------------------------------------
st.subheader("3. KV-cache precision")
st.markdown(TEXT["kv_intro"])
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
    chart(kv_precision_figure(kv, presenter))
    st.markdown(text.kv_verdict(kv, comparison.positions, comparison.text_what, bundled.context))
    st.dataframe(kv[["cache", *KV_COLUMNS]], hide_index=True, column_config=KV_COLUMNS)
    kv_fields = dict(runs=kv_precision.DECODE_RUNS, tokens=kv_precision.DECODE_TOKENS, vocab=bundled.vocab)
    kv_fields |= dict(positions=comparison.positions, what=comparison.text_what)
    caption("measured", TEXT["kv_caption"].format(**kv_fields))
