"""Start here: what inference is, in five steps, each one a live result from the loaded model."""

import streamlit as st

from app_pages.shared import layout
from app_pages.shared.captions import caption
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import model_slot
from inference.core.loader import encode_prompt
from inference.core.prompting import opening_prompt
from inference.lessons.start.first_look import DRAW_SETTINGS, first_look
from inference.lessons.start.text import TEXT, chip, choosing, percent


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
st.markdown(TEXT["intro"].format(name=info.name, millions=info.parameters / 1e6))

PROMPT = opening_prompt("start", info.name).text
look = cached_first_look(info.name, tuple(encode_prompt(loaded.tokenizer, PROMPT)), loaded)
chips = " ".join(chip(token) for token in look.prompt_tokens)
top = ", ".join(f"{chip(token)} {percent(probability)}" for token, probability in look.top)

st.subheader("1. Text becomes tokens")
st.markdown(TEXT["tokens"].format(prompt=PROMPT, count=len(look.prompt_tokens), chips=chips))
link("app_pages/generate.py", label="Generate: watch every token being chosen", icon="✍️")

st.subheader("2. One forward pass scores every token")
st.markdown(TEXT["scores"].format(vocab=look.vocab_size, top=top))
link("app_pages/sampling.py", label="Sampling lab: what temperature, top-k and top-p do to them", icon="🎲")

st.subheader("3. One token is chosen")
st.markdown(choosing(look, DRAW_SETTINGS.temperature))
link("app_pages/sampling.py", label="Sampling lab: 1,000 draws against the computed probabilities", icon="🎲")

st.subheader("4. Reading the prompt is one pass; every new token is another")
st.markdown(TEXT["timing"].format(count=len(look.prompt_tokens), prefill=look.prefill_ms, decode=look.decode_ms))
link("app_pages/prefill-decode.py", label="Prefill vs decode: the timeline and a sweep over prompt lengths", icon="⏱️")

st.subheader("5. The model keeps what it has read: the KV cache")
formula = TEXT["formula" if look.formula_is_the_plain_product else "formula_other"].format(l=look)
st.markdown(TEXT["cache"].format(bytes=look.cache_bytes, formula=formula))
link("app_pages/kv-cache.py", label="KV cache: how it grows, what it saves, how big it gets for real models", icon="🗄️")

caption("measured", TEXT["caption"].format(name=info.name, runs=look.timed_runs))

st.subheader("Then: making it cheaper")
link("app_pages/quantization.py", label="Quantization: the same model in fewer bits", icon="🗜️")
link("app_pages/moe.py", label="Mixture of Experts: only part of the model works on each token", icon="🧩")
link("app_pages/speculative.py", label="Speculative decoding: a small model guesses, the big one checks", icon="🎯")
link("app_pages/cost.py", label="Cost: what a token costs, and what batching does to it", icon="💰")
link("app_pages/serving.py", label="Serve many: one engine batching a whole class's requests", icon="🚦")
