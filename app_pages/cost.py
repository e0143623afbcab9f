"""Cost: why output tokens, batch size and context set the price (Mixture of Experts has its own page, /moe)."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click, shared_results
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from inference.core import machine
from inference.lessons.cost import text as cost_text
from inference.lessons.cost.batching import PROMPT_TOKENS, ROUNDS, STEPS, batch_sizes_for, measure_batches
from inference.lessons.cost.experiments import PREFILL_REPEATS, cost_per_million_tokens, measure_answer
from inference.lessons.cost.figures import answer_split_figure, batching_figure, context_figure
from inference.lessons.prefill_decode.timing import crossover_prompt_tokens, default_prompt_lengths, measure_sweep

ANSWER_KEY = "cost_answer"
CONTEXT_REPEATS = 3  # runs per context length: the decode-vs-context chart's medians
DEFAULT_PRICE_PER_HOUR = 1.00  # illustrative; the page says so and lets the user type theirs


limits = models.limits()
loaded = current_model(needs_weights="it times batches and Mixture-of-Experts routing in this process")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info

st.title("💰 What a token costs")
st.markdown("Serving a model costs **machine time**: how much a token takes is measured below, on this machine.")
with st.expander("What decides it: input or output, the batch, the context, the active parameters"):
    st.markdown(
        "Whether a token is an input token (read in one parallel prefill pass) or an output token (one decode pass "
        "each), how many users share each pass (the **batch**), how long the **context** is (every decode step reads "
        "the whole KV cache), and how many weights each token has to touch (**active parameters**, which "
        "Mixture-of-Experts models cut)."
    )

# -- 1. one answer -----------------------------------------------------------------------
st.subheader("1. One answer: input tokens are cheap, output tokens are dear")
longest_prompt = max(8, min(info.context - 64, limits.max_prompt_tokens, 448))
c1, c2 = st.columns(2)
prompt_tokens = c1.slider(
    "Prompt tokens", 8, longest_prompt, min(256, longest_prompt), step=8, key="cost_prompt", persist_state="session"
)
reply_room = max(2, min(limits.max_new_tokens, info.context - prompt_tokens, 256))
reply_tokens = c2.slider("Reply tokens", 2, reply_room, min(128, reply_room), key="cost_reply", persist_state="session")
again = st.button("Measure again", key="cost_again", help="Timings move a little every run: the machine is shared.")
answer_key = (info.name, prompt_tokens, reply_tokens)
stored = st.session_state.get(ANSWER_KEY)
if stored is None or stored[0] != answer_key or again:
    with generation_slot():
        st.session_state[ANSWER_KEY] = (answer_key, measure_answer(model, tokenizer, prompt_tokens, reply_tokens))
answer = st.session_state[ANSWER_KEY][1]

chart(answer_split_figure(answer, layout.presenter()), width="stretch", key="cost_split")
caption(
    "measured",
    f"One greedy answer with the step engine: the prefill pass over {answer.prompt_tokens} "
    f"prompt tokens (median of {PREFILL_REPEATS}), then {answer.reply_tokens - 1} decode passes (the first reply token "
    "comes from the prefill pass). The prompt is fixed pseudo-random tokens: their meaning does not "
    "change the time.",
)
m = layout.metric_cells(3, per_row=3)
m[0].metric("Per input token", f"{answer.ms_per_input_token:.3f} ms", help="Prefill pass ÷ prompt tokens.")
m[1].metric("Per output token", f"{answer.ms_per_output_token:.2f} ms", help=cost_text.output_token_help(answer))
m[2].metric(
    "Output ÷ input", f"{answer.output_vs_input:,.0f}×", help="How much more machine time an output token took."
)
sweep = shared_results().get(("sweep", info.name))  # the Prefill vs decode page's sweep, if run (read only)
crossing = crossover_prompt_tokens(sweep, answer.reply_tokens - 1) if sweep is not None else None
fits = machine.weights_fit_in_cache(info.weight_bytes)
# weights_vs_cache says what limits a decode pass; this adds only how prefill and decode pay for it
mechanism = {
    True: "The prefill pass pays that fixed cost once for all its prompt tokens; the reply pays it once per token.",
    False: "The prefill pass reads the weights once for all its prompt tokens; each decode pass reads them again "
    "for one token.",
    None: "",
}[fits]
st.markdown(
    f"The reply is **{answer.reply_share:.0%} of the tokens** "
    f"but took **{answer.decode_share:.0%} of the time**. {machine.weights_vs_cache(info.weight_bytes)} {mechanism}"
    f"\n\n{cost_text.wait_sentence(answer, info.context, crossing)}"
)
st.expander(f"On a GPU: {cost_text.SECTIONS['gpu']}").markdown(
    "🎨 **The GPU picture (illustrative, not measured here):** a model of many GB does not fit any cache, so on a GPU a "
    "decode pass for one sequence is limited by reading every weight from memory, while prefill turns the same "
    "read into arithmetic for every prompt token. That asymmetry is why API price lists charge more for output "
    "tokens than for input tokens."
)

# -- 2. batching ---------------------------------------------------------------------------
st.subheader("2. Batching: many users share every read of the weights")
batch_sizes = batch_sizes_for(info.parameters)
st.markdown(
    f"Decode passes for {', '.join(map(str, batch_sizes))} sequences at once ({PROMPT_TOKENS}-token prompts; "
    f"{ROUNDS * STEPS} timed passes per size, in {ROUNDS} rounds over all sizes; median). One pass reads the "
    "weights once however many sequences it serves."
)
batches = measure_on_click(
    "Measure batching",
    "cost_batches",
    ("batches", info.name),
    lambda progress: measure_batches(model, batch_sizes, progress=progress),
    f"Press **Measure batching** ({len(batch_sizes)} batch sizes × {ROUNDS * STEPS} timed passes).",
)
if batches is not None:
    chart(batching_figure(batches, layout.presenter()), width="stretch", key="cost_batch_chart")
    caption(
        "measured",
        "Median decode pass for each batch size after a warm-up, through transformers' own "
        "forward (the engine's lean step serves one sequence at a time); machine time per token = "
        "pass time ÷ batch. KV cache bytes are read from the cache tensors.",
    )
    first, best = batches.iloc[0], batches.loc[batches["ms_per_token"].idxmin()]
    fixed_cost = (
        "the fixed cost of running its operations (the weights sit in the cache here)"
        if fits
        else "reading every weight (they do not fit the cache here)"
        if fits is False
        else "reading the weights and running its operations"
    )
    st.markdown(
        f"One sequence: **{first.ms_per_pass:.1f} ms** per pass for 1 token through transformers' forward (the "
        f"engine's own step, section 1: {answer.ms_per_output_token:.2f} ms). {int(best.batch)} sequences: "
        f"**{best.ms_per_pass:.1f} ms** per pass for {int(best.batch)} tokens, so each token took "
        f"**{best.speedup_per_token:.0f}× less** machine time: a pass pays {fixed_cost} once, however many "
        f"sequences it serves. The gain flattens once the work that grows with the batch (arithmetic for every "
        f"token, reading every sequence's cache) takes over, and the KV cache grows with every sequence "
        f"({best.kv_cache_bytes / 1e6:,.1f} MB here at {int(best.batch)} sequences × {int(best.tokens_per_sequence)} tokens): memory for the cache is "
        "what caps the batch on a real server (see the KV cache page)."
    )
    st.markdown("**What a million output tokens cost at this machine's speed**")
    price = st.number_input(
        "Machine price per hour ($)",
        0.0,
        1000.0,
        DEFAULT_PRICE_PER_HOUR,
        step=0.25,
        key="cost_price",
        persist_state="session",
        help="Type what your machine costs; the default is only an example.",
    )
    costs = batches[["batch", "ms_per_token"]].copy()
    costs["cost per 1M output tokens ($)"] = [cost_per_million_tokens(ms, price) for ms in costs["ms_per_token"]]
    input_cost = cost_per_million_tokens(answer.ms_per_input_token, price)
    st.dataframe(
        costs.rename(columns={"ms_per_token": "ms per token"}),
        hide_index=True,
        width="stretch",
        column_config={
            "ms per token": st.column_config.NumberColumn(format="%.3f"),
            "cost per 1M output tokens ($)": st.column_config.NumberColumn(format="$%.4f"),
        },
    )
    caption(
        "illustrative",
        f"The price per hour (${price:,.2f}) is an example you can change; the times are "
        f"measured above. At that price, a million **input** tokens (prefill, from section 1) cost "
        f"${input_cost:,.4f}. Cost = price per hour ÷ 3,600,000 ms × ms per token × 1,000,000.",
    )

# -- 3. context length ----------------------------------------------------------------------
st.subheader("3. Context: every decode step reads the whole cache")
context_lengths = default_prompt_lengths(info.context)
st.markdown(
    "A decode step attends over every token before it, so its keys and values are read from the cache at every "
    f"step. This times decode steps after prompts of {', '.join(map(str, context_lengths))} tokens: the same kind "
    "of run as the Prefill vs decode page's sweep, kept apart from it."
)
context_sweep = measure_on_click(
    "Measure decode against context",
    "cost_context",
    ("cost-context", info.name),
    lambda progress: measure_sweep(model, context_lengths, repeats=CONTEXT_REPEATS, progress=progress),
    f"Press the button ({len(context_lengths)} context lengths × {CONTEXT_REPEATS} runs, after a warm-up round).",
)
if context_sweep is not None:
    rows = context_sweep.summary
    short, long = rows.iloc[0], rows.iloc[-1]
    chart(context_figure(rows, layout.presenter()), width="stretch", key="cost_context_chart")
    st.markdown(
        cost_text.context_sentence(
            int(short.prompt_tokens), short.decode_ms_per_token, int(long.prompt_tokens), long.decode_ms_per_token
        )
    )
    caption(
        "measured",
        f"Median of {context_sweep.repeats} runs per context length, bars from the first quartile to the third; "
        f"each run is {context_sweep.decode_tokens} decode steps with the engine's own step after one prefill.",
    )

# -- 4. mixture of experts: its own page --------------------------------------------
st.subheader("4. Mixture of Experts: pay for the experts a token uses")
st.markdown(cost_text.MOE_POINTER)
st.page_link("app_pages/moe.py", label="Mixture of Experts", icon="🧩")
