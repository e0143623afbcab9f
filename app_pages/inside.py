"""Inside one forward pass: what each layer would predict, what each head read from the cache, where the time goes."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from app_pages.shared.url_state import read_url_index
from inference.core import machine
from inference.core.calculator import find_model
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.tokens import readable_token, readable_tokens
from inference.lessons.inside import text
from inference.lessons.inside.adapters import Adapter
from inference.lessons.inside.figures import attention_grid, followed_token_figure, parts_figure, rank_heatmap
from inference.lessons.inside.forward_pass import DECODE_REPEATS, UnsupportedModel, look_inside, public_shares

RESULTS_KEY = "inside_results"  # (model, dtype, token ids, followed token) -> Inside: a picker never reruns the model
KEPT_RESULTS = 8
DRAWN_POSITIONS = 128  # the last positions drawn per head, after the first few; the rest are summed in a sentence
FIRST_POSITIONS = 4  # the first tokens, where heads often put much of their weight, are always drawn
GENERATE_RUN = "My Generate run"
TYPED = "A prompt typed here"
PUBLIC_MODEL, PUBLIC_CONTEXTS = "Llama-3.1-8B", (1024, 32768)

loaded = current_model(
    needs_weights="it reads the hidden states and attention weights inside the forward pass, which a serving "
    "engine does not return"
)
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info

st.title("🔬 Inside one forward pass")
st.markdown(
    "Every page so far showed what comes *out* of a forward pass. Here is the pass itself, for one new token: "
    "what each layer would predict, what each attention head read from the KV cache, and which parts the time "
    "and the bytes go to."
)
try:
    Adapter(model)
except UnsupportedModel as err:
    st.warning(str(err), icon="⚠️")
    st.stop()

# -- which pass ----------------------------------------------------------------------------------
trace = st.session_state.get("gen_trace")
follows = trace is not None and getattr(trace, "model", None) is model and bool(trace.records)
source = TYPED  # the choice only once there is one (a radio of one option, as on Sampling lab)
if follows:
    source = st.radio(
        "Which pass", [GENERATE_RUN, TYPED], key="inside_source", persist_state="session", horizontal=True
    )
if trace is not None and not follows and trace.records:
    st.caption("Your Generate run was made with another model or on a serving engine: type a prompt here instead.")
if source == GENERATE_RUN and follows:
    steps = len(trace.records)
    for problem in read_url_index("step", "inside_step", steps - 1, "step"):
        st.warning(problem)
    st.session_state["inside_step"] = min(st.session_state.get("inside_step", steps - 1), steps - 1)  # rewound runs
    step = st.slider("Step of the run", 0, steps - 1, key="inside_step", persist_state="session") if steps > 1 else 0
    ids = trace.all_ids[: len(trace.prompt_ids) + step]
    followed, role = trace.records[step].token_id, "token the run chose"
    st.caption(
        f"Step {step}: the pass that read {len(ids):,} tokens and gave the distribution this token was drawn from."
    )
else:
    opening = opening_prompt("inside", info.name).text
    st.text_area("Prompt", opening, key="inside_prompt", persist_state="session", height=80, max_chars=20_000)
    prepared = prepare_prompt(tokenizer, st.session_state.inside_prompt, False, info.context, models.limits())
    for note in prepared.notes:
        st.info(note)
    if prepared.error:
        st.warning(prepared.error)
        st.stop()
    ids, followed, role = prepared.ids, None, "model's top token"

key = (info.name, info.dtype, tuple(ids), followed)
results = st.session_state.setdefault(RESULTS_KEY, {})
again = st.button("Time the pass again", key="inside_again", help="The machine is shared: times vary between runs.")
if key not in results or again:
    with generation_slot(), st.spinner("Timing the forward pass…"):
        results[key] = look_inside(model, ids, followed)
    while len(results) > KEPT_RESULTS:
        results.pop(next(iter(results)))
inside = results[key]
presenter = layout.presenter()
name = lambda token_id: readable_token(tokenizer, token_id)  # noqa: E731

# -- 1. logit lens -----------------------------------------------------------------------------------
st.subheader("1. What each layer would say")
# the table and the chart stacked: side by side, 800 px cut the table and the axis
st.dataframe(
    inside.lens_table(name),
    hide_index=True,
    width="stretch",
    column_config={"followed": st.column_config.NumberColumn(f"p({name(inside.followed_id)})", format="percent")},
)
caption(
    "exact",
    f"Each layer's top 3 tokens (layer 0 = the embeddings) and the {role}'s probability, through the lens below.",
)
probs = inside.followed_probs()
chart(followed_token_figure(probs, name(inside.followed_id), presenter), width="stretch", key="inside_lens")
caption("exact", "The same probability as a line: the softmax over all tokens of each layer's lens.")
tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
said = text.sentences(inside, name, role, tied, machine.cpu_name(), info.vocab_size)
st.markdown(said["lens"])
chart(
    rank_heatmap(
        inside.ranks,
        readable_tokens(tokenizer, [inside.token_ids[p] for p in inside.rank_positions]),
        readable_tokens(tokenizer, inside.rank_targets),
        inside.rank_positions,
        presenter,
    ),
    width="stretch",
    key="inside_ranks",
    text=said["ranks"],
)
caption(
    "exact",
    f"Columns: the last {len(inside.rank_positions)} positions (the token read); each cell: where the token that "
    "came next ranks among all tokens in that layer's lens (last column: the "
    f"{role}). The last row is the model's own distribution.",
)
caption("published", text.TEXT["lens_source"])

# -- 2. attention ------------------------------------------------------------------------------------
st.subheader("2. What each head read")
for problem in read_url_index("layer", "inside_layer", inside.layers - 1, "layer"):
    st.warning(problem)
layer = (
    st.slider("Layer", 0, inside.layers - 1, key="inside_layer", persist_state="session") if inside.layers > 1 else 0
)
weights = inside.attention[layer]
drawn = sorted(
    set(range(min(FIRST_POSITIONS, inside.context)))
    | set(range(max(0, inside.context - DRAWN_POSITIONS), inside.context))
)
labels = readable_tokens(tokenizer, [inside.token_ids[p] for p in drawn])
chart(
    attention_grid(weights[:, drawn].tolist(), labels, inside.kv_groups, drawn, 1 if presenter else 2, presenter),
    width="stretch",
    key="inside_attention",
)
hidden_weight = float((weights.sum(-1) - weights[:, drawn].sum(-1)).max())  # the most any head puts outside
layer_said = text.layer_sentences(inside, layer, drawn, hidden_weight)
caption(
    "exact",
    f"The new token's attention weights in layer {layer}: softmax(q·K/√d) of its query against every key in the "
    "KV cache, each head summing to 1 (equal to transformers' eager attention in the tests). Hover a bar for its "
    f"token. {layer_said['drawn']}",
)
st.markdown(layer_said["heads"])
st.dataframe(
    inside.kv_table(layer),
    hide_index=True,
    width="stretch",
    column_config={"K and V bytes": st.column_config.NumberColumn(format="localized")},
)
caption("measured", "Bytes read from this layer's cache tensors, split evenly over its K/V heads.")

# -- 3. parts ----------------------------------------------------------------------------------------
st.subheader("3. Where the pass's time and bytes go")
chart(parts_figure(inside.parts, presenter), width="stretch", key="inside_parts")
caption(
    "measured",
    f"Time: each part timed inside one prefill pass over the {inside.context:,} tokens and the median of "
    f"{DECODE_REPEATS} decode passes of the last one, on a shared machine (it varies from run to run). Work: FLOPs and bytes "
    f"computed exactly from the weights; they add up to {inside.parts.flops.sum():,} FLOPs (flops.py's decode "
    f"count) and {inside.parts.bytes.sum():,} weight bytes (the loaded weights).",
)
st.markdown(said["work"])
if "timed_vs_plain" in said:  # the timed pass is not the step other pages time: both, and what differs
    st.markdown(said["timed_vs_plain"])
with st.expander(f"On a big model: {text.TEXT['public']}"):
    st.markdown(text.TEXT["public_shares"].format(**public_shares(find_model(PUBLIC_MODEL), PUBLIC_CONTEXTS)))
    caption(
        "published",
        f"{PUBLIC_MODEL}'s shape from its published config (assets/public_models.json), FLOPs computed exactly from it.",
    )
with st.expander(f"Every part as a table: {text.TEXT['parts']}"):
    numbers = st.column_config.NumberColumn(format="localized")
    st.dataframe(
        inside.parts[list(text.PART_COLUMNS)].rename(columns=text.PART_COLUMNS),
        hide_index=True,
        width="stretch",
        column_config={
            name: numbers for name in ("decode FLOPs", "prefill FLOPs", "weight bytes", "bytes a decode reads")
        },
    )
    caption("measured", text.TEXT["parts_caption"])
