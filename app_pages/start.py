"""Start here: what inference is, in five steps, each one a live result from the loaded model."""

import streamlit as st

from app_pages.shared import layout
from app_pages.shared.captions import caption
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import model_slot
from inference.core.loader import encode_prompt
from inference.core.prompting import opening_prompt
from inference.lessons.start.first_look import DRAW_SETTINGS, first_look
from inference.lessons.start.text import chip, choosing, percent


# Runs only on a cache miss (once per model), so only then does it wait for a model slot.
@st.cache_data(max_entries=8, show_spinner="Running the model once…")
def cached_first_look(model_name: str, prompt_ids: tuple, _loaded):
    with model_slot():
        return first_look(_loaded.model, _loaded.tokenizer, list(prompt_ids))


def link(page: str, label: str, icon: str) -> None:
    """A link to a deeper page; in presenter mode only its name (the text after the colon did not fit at 800 px,
    and a link label does not wrap)."""
    st.page_link(page, label=label.split(":")[0] if layout.presenter() else label, icon=icon)


loaded = current_model(needs_weights="it times a forward pass and reads the KV cache's tensors here")
info = loaded.info

st.title("🧭 Start here: how a model writes")
st.markdown(
    f"Inference is running a trained model to get text out of it. Below, **{info.name}** "
    f"({info.parameters / 1e6:,.1f} M parameters) continues one prompt, and each step shows a real result from "
    "that run. Each page in the sidebar goes deeper into one step; walk them top to bottom."
)

PROMPT = opening_prompt("start", info.name).text
look = cached_first_look(info.name, tuple(encode_prompt(loaded.tokenizer, PROMPT)), loaded)
chips = " ".join(chip(token) for token in look.prompt_tokens)
top = ", ".join(f"{chip(token)} {percent(probability)}" for token, probability in look.top)

st.subheader("1. Text becomes tokens")
st.markdown(f"The prompt *{PROMPT}* is read as **{look.prompt_length} tokens**: {chips}")
link("app_pages/generate.py", label="Generate: watch every token being chosen", icon="✍️")

st.subheader("2. One forward pass scores every token")
st.markdown(
    f"The model gives each of its **{look.vocab_size:,} tokens** a probability for what comes next. "
    f"The most likely: {top}."
)
link("app_pages/sampling.py", label="Sampling lab: what temperature, top-k and top-p do to them", icon="🎲")

st.subheader("3. One token is chosen")
st.markdown(choosing(look, DRAW_SETTINGS.temperature))
link("app_pages/sampling.py", label="Sampling lab: 1,000 draws against the computed probabilities", icon="🎲")

st.subheader("4. Reading the prompt is one pass; every new token is another")
st.markdown(
    f"The first pass read all {look.prompt_length} prompt tokens at once in **{look.prefill_ms:.1f} ms** "
    f"(prefill); one more token then took **{look.decode_ms:.1f} ms** (a decode step). A reply of a hundred "
    "tokens is a hundred decode steps: that is where the time goes."
)
link("app_pages/prefill-decode.py", label="Prefill vs decode: the timeline and a sweep over prompt lengths", icon="⏱️")

st.subheader("5. The model keeps what it has read: the KV cache")
if look.formula_is_the_plain_product:
    formula = (
        f"2 (keys and values) × {look.layers} layers × {look.kv_heads} KV heads × {look.head_dim} dims × "
        f"{look.cache_tokens} tokens × {look.bytes_per_element} bytes = {look.formula_bytes:,}"
    )
else:
    formula = f"the formula for this model's layers (sliding windows or a latent cache) gives {look.formula_bytes:,}"
st.markdown(
    f"After the prompt, the cache holds **{look.cache_bytes:,} bytes**, read from its tensors; {formula}. It grows "
    "with every token, so a decode step computes one token's keys and values instead of the whole text's."
)
link("app_pages/kv-cache.py", label="KV cache: how it grows, what it saves, how big it gets for real models", icon="🗄️")

caption(
    "measured",
    f"One run of {info.name} on this machine, computed once per model and kept. Steps 1–3 "
    "and 5 are exact (the model's own outputs and cache tensors); the times in step 4 are the median "
    f"of {look.timed_runs} runs, timed by the step engine, and move a little with what else this machine "
    "is doing.",
)

st.subheader("Then: making it cheaper")
link("app_pages/quantization.py", label="Quantization: the same model in fewer bits", icon="🗜️")
link("app_pages/moe.py", label="Mixture of Experts: only part of the model works on each token", icon="🧩")
link("app_pages/speculative.py", label="Speculative decoding: a small model guesses, the big one checks", icon="🎯")
link("app_pages/cost.py", label="Cost: what a token costs, and what batching does to it", icon="💰")
link("app_pages/serving.py", label="Serve many: one engine batching a whole class's requests", icon="🚦")
