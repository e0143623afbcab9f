"""Cost: why output tokens, batch size and context set the price (Mixture of Experts has its own page, /moe)."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click, shared_results
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from inference.lessons.cost import text as cost_text
from inference.lessons.cost.batching import PROMPT_TOKENS, ROUNDS, STEPS, batch_sizes_for, measure_batches
from inference.lessons.cost.experiments import PREFILL_REPEATS, cost_per_million_tokens, measure_answer
from inference.lessons.cost.figures import answer_split_figure, batching_figure, context_figure
from inference.lessons.cost.text import TEXT
from inference.lessons.prefill_decode.timing import crossover_prompt_tokens, default_prompt_lengths, measure_sweep

ANSWER_KEY = "cost_answer"
CONTEXT_REPEATS = 3  # runs per context length: the decode-vs-context chart's medians
DEFAULT_PRICE_PER_HOUR = 1.00  # illustrative; the page says so and lets the user type theirs


limits = models.limits()
loaded = current_model(needs_weights="it times batches and Mixture-of-Experts routing in this process")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info

st.title("💰 What a token costs")
st.markdown("Serving a model costs **machine time**: how much a token takes is measured below, on this machine.")
st.expander("What decides it: input or output, the batch, the context, the active parameters").markdown(TEXT["decides"])

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
caption("measured", TEXT["answer_caption"].format(prompt=answer.prompt_tokens, repeats=PREFILL_REPEATS,
                                                  passes=answer.reply_tokens - 1))  # fmt: skip
m = layout.metric_cells(3, per_row=3)
m[0].metric("Per input token", f"{answer.ms_per_input_token:.3f} ms", help="Prefill pass ÷ prompt tokens.")
m[1].metric("Per output token", f"{answer.ms_per_output_token:.2f} ms", help=cost_text.output_token_help(answer))
m[2].metric(
    "Output ÷ input", f"{answer.output_vs_input:,.0f}×", help="How much more machine time an output token took."
)
sweep = shared_results().get(("sweep", info.name))  # the Prefill vs decode page's sweep, if run (read only)
crossing = crossover_prompt_tokens(sweep, answer.reply_tokens - 1) if sweep is not None else None
st.markdown(cost_text.answer_sentences(answer, info.weight_bytes, info.context, crossing))
st.expander(f"On a GPU: {TEXT['gpu']}").markdown(TEXT["gpu_body"])

# -- 2. batching ---------------------------------------------------------------------------
st.subheader("2. Batching: many users share every read of the weights")
batch_sizes = batch_sizes_for(info.parameters)
intro = TEXT["batching_intro"].format(sizes=", ".join(map(str, batch_sizes)), prompt=PROMPT_TOKENS,
                                      passes=ROUNDS * STEPS, rounds=ROUNDS)  # fmt: skip
st.markdown(intro)
batches = measure_on_click(
    "Measure batching",
    "cost_batches",
    ("batches", info.name),
    lambda progress: measure_batches(model, batch_sizes, progress=progress),
    f"Press **Measure batching** ({len(batch_sizes)} batch sizes × {ROUNDS * STEPS} timed passes).",
)
if batches is not None:
    chart(batching_figure(batches, layout.presenter()), width="stretch", key="cost_batch_chart")
    caption("measured", TEXT["batching_caption"])
    st.markdown(cost_text.batching_sentence(batches, answer.ms_per_output_token, info.weight_bytes))
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
    caption("illustrative", TEXT["price_caption"].format(price=price, input_cost=input_cost))

# -- 3. context length ----------------------------------------------------------------------
st.subheader("3. Context: every decode step reads the whole cache")
context_lengths = default_prompt_lengths(info.context)
st.markdown(TEXT["context_intro"].format(lengths=", ".join(map(str, context_lengths))))
context_sweep = measure_on_click(
    "Measure decode against context",
    "cost_context",
    ("cost-context", info.name),
    lambda progress: measure_sweep(model, context_lengths, repeats=CONTEXT_REPEATS, progress=progress),
    f"Press the button ({len(context_lengths)} context lengths × {CONTEXT_REPEATS} runs, after a warm-up round).",
)
if context_sweep is not None:
    chart(context_figure(context_sweep.summary, layout.presenter()), width="stretch", key="cost_context_chart")
    st.markdown(cost_text.context_sentence(context_sweep))
    caption("measured", TEXT["context_caption"].format(repeats=context_sweep.repeats,
                                                       decode_tokens=context_sweep.decode_tokens))  # fmt: skip

# -- 4. mixture of experts: its own page --------------------------------------------
st.subheader("4. Mixture of Experts: pay for the experts a token uses")
st.markdown(TEXT["moe"])
st.page_link("app_pages/moe.py", label="Mixture of Experts", icon="🧩")
