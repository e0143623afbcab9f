"""The KV cache page's sentences, every number passed in (from the model's shape, the runs on the page or the
public configs)."""

from __future__ import annotations

from inference.core.kv_cache import KVShape
from inference.core.measuring import Timing
from inference.core.tokens import markdown_token_text
from inference.lessons.kv_cache.figures import SMOOTHING_STEPS
from inference.lessons.kv_cache.repetition import RepeatedPhrase

INTRO = (
    "In every layer, attention turns each token into a **key** and a **value** vector (per KV head). "
    "They never change once computed, so the model keeps them: the **KV cache**. Each decode step then "
    "computes keys and values for the one new token only and reads the rest from the cache."
)
CAPTIONS = {
    "growth": "Dots: bytes of the real key and value tensors after each step. Line: the formula "
    "for that many tokens. Step 0 caches the whole prompt at once.",
    "table": "Measured = element count × element size of every key and value tensor in the cache.",
    "cumulative": "Running total of the same passes: with the cache it grows in a straight line, "
    "without it each step costs more than the last, so the total bends upward (quadratic).",
    "public_table": "GB = 10⁹ bytes. Window layers keep at most their window (Mistral-7B-v0.1: all 32; "
    "Gemma-2: every other layer); MLA models (DeepSeek-V3) cache a compressed latent instead of per-head "
    "keys and values, and their MHA column is the uncompressed cache. Each model's notes are below.",
}
STEP_COLUMNS = {  # the step table's column names as the page shows them
    "tokens_fed": "tokens fed",
    "cache_tokens": "tokens in cache",
    "measured_bytes": "measured bytes",
    "formula_bytes": "formula bytes",
    "agree": "equal",
}
SECTIONS = {  # each closed section's one line: what opening it shows
    "steps": "tokens fed, tokens cached, and the measured bytes against the formula's",
    "models": "attention type, heads, KV heads, cache and weight sizes, and MB per token",
    "sources": "each model's config.json and what it keeps differently",
}
CALCULATOR_INTRO = (
    "KV cache = 2 × layers × KV heads × head dim × **tokens × batch** × bytes per number (a layer with a sliding "
    "window keeps at most its window of tokens; an MLA model caches one compressed latent instead). It grows with "
    "every token of every sequence being served, and can outgrow the weights."
)


def bytes_per_token(shape: KVShape, dtype: str) -> str:
    return (
        f"Bytes per token = 2 (K and V) × {shape.layers} layers × {shape.kv_heads} KV heads × {shape.head_dim} "
        f"dims × {shape.bytes_per_element} bytes ({dtype}) = **{shape.bytes_per_token():,} bytes**."
    )


def layers_caption(tokens: int) -> str:
    return (
        f"Bytes per layer after the last step ({tokens} tokens), read from each layer's tensors; the red mark is "
        "the formula for one layer."
    )


def with_and_without_intro(new_tokens: int) -> str:
    return (
        f"The same {new_tokens} tokens, chosen greedily, decoded twice side by side: **with the cache** (one token "
        "per pass) and **without** it (every pass recomputes keys and values for the whole sequence)."
    )


def compare_not_yet(new_tokens: int) -> str:
    return (
        f"Press the button to run it: it decodes the {new_tokens} tokens twice, and the time without the cache "
        "grows with the square of the length (that is the point)."
    )


def step_time_caption(engine_step: Timing | None, with_cache: Timing | None = None) -> str:
    """The step-time chart's caption; the two decode-step figures named with what was timed (`Timing.label`)."""
    engine = f" Section 1's run, for comparison: {engine_step.label()}." if engine_step is not None else ""
    cached = f" This chart's {with_cache.label()}." if with_cache is not None else ""
    return (
        f"Forward-pass time of each step (thin) and the running median of {SMOOTHING_STEPS} steps (thick); rare "
        "spikes from other programs may run off the top. With the cache each pass reads one new token; without "
        "it, the whole sequence so far. Step 0 (the prompt) costs the same either way. Both run transformers' own "
        f"forward, so only the cache differs.{cached}{engine}"
    )


def trend(
    model_name: str,
    with_cache_ms: float,
    first_without_ms: float,
    last_without_ms: float,
    last_context: int,
    lean_step_ms: float | None = None,
) -> str:
    """The with/without-cache comparison on the loaded model, in its own measured step times; `lean_step_ms`, the
    median decode step of section 1's run, is named beside it with what differs in how the two were timed."""
    beside = (
        f" (each timed interleaved with a no-cache pass over the whole sequence; section 1's run, its steps one "
        f"after another, took {lean_step_ms:.2f} ms a step)"
        if lean_step_ms is not None
        else ""
    )
    return (
        f"📏 **In this run** on {model_name}, a step with the cache took a median of {with_cache_ms:.1f} ms{beside}. "
        f"Without it, a step took {first_without_ms:.1f} ms near the start and {last_without_ms:.1f} ms near the end "
        f"({last_context} tokens recomputed every pass), and it keeps growing with the length. So the cache saved "
        f"{max(first_without_ms - with_cache_ms, 0):.1f} ms a step near the start and "
        f"{max(last_without_ms - with_cache_ms, 0):.1f} ms near the end: little on a short reply, more on a long one."
    )


def tokens_differ(step: int) -> str:
    return (
        f"The tokens differ from step {step}: rounding differences between the two ways of computing made a "
        "near-tie go the other way."
    )


def loop_note(phrase: RepeatedPhrase, phrase_text: str, tokens: int) -> str:
    """One line saying the greedy text loops (from its token ids), before the link to the repetition penalty."""
    return (
        f"🔁 **The greedy text loops:** {markdown_token_text(repr(phrase_text.strip()))} comes back {phrase.times} "
        f"times in these {tokens} tokens. Greedy decoding takes the most likely token every step, and a phrase "
        "already said makes itself likely again; a repetition penalty makes tokens already in the text less likely."
    )


def at_this_model(dtype: str, formula_bytes: int, tokens: int = 512) -> str:
    return (
        f"At {tokens} tokens in {dtype}, the formula gives this app's model {formula_bytes:,} bytes: the same "
        "formula the real tensors matched above."
    )


def calculator_caption(context: int, batch: int, precision: str) -> str:
    return (
        f"From each model's published config (sources and notes below) with the formula above, at {context:,} "
        f"tokens × batch {batch} in {precision}: sliding-window layers count min(tokens, window). Weights: "
        "parameters × bytes; MoE models count every expert. For an MLA model the light bar is the uncompressed "
        "per-head cache it would need without its latent."
    )


def gqa_saving(model: str, heads: int, kv_heads: int, kv: str, without: str, saving: float) -> str:
    return (
        f"**What grouped-query attention saves:** in {model}, {heads} query heads share {kv_heads} KV heads, so at "
        f"this length and batch its cache is **{kv} instead of {without}** ({saving:.0f}× less). The light bars "
        "show each model's cache with one K/V head per query head; the tables give the factor."
    )


def size_text(gb: float) -> str:
    """A size in GB, or in MB below 0.1 GB."""
    return f"{gb:,.1f} GB" if gb >= 0.1 else f"{gb * 1e3:,.2f} MB"
