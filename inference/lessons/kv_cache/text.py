"""What the KV cache page says: one dict of Markdown templates, every number filled in from the model's shape, the
runs on the page or the public configs; comparisons of two measurements worded by `measuring.compare`."""

from __future__ import annotations

from inference.core.measuring import Timing, compare
from inference.lessons.kv_cache.experiments import CacheComparison
from inference.lessons.kv_cache.figures import SMOOTHING_STEPS

TEXT = {
    "intro": "In every layer, attention turns each token into a **key** and a **value** vector (per KV head). They "
    "never change once computed, so the model keeps them: the **KV cache**. Each decode step then computes keys and "
    "values for the one new token only and reads the rest from the cache.",
    "bytes_per_token": "Bytes per token = 2 (K and V) × {s.layers} layers × {s.kv_heads} KV heads × {s.head_dim} dims "
    "× {s.bytes_per_element} bytes ({dtype}) = **{per_token:,} bytes**.",
    "growth": "Dots: bytes of the real key and value tensors after each step. Line: the formula for that many "
    "tokens. Step 0 caches the whole prompt at once.",
    "layers": "Bytes per layer after the last step ({tokens} tokens), read from each layer's tensors; the red mark "
    "is the formula for one layer.",
    "table": "Measured = element count × element size of every key and value tensor in the cache.",
    "steps": "tokens fed, tokens cached, and the measured bytes against the formula's",
    "with_and_without": "The same {tokens} tokens, chosen greedily, decoded twice side by side: **with the cache** "
    "(one token per pass) and **without** it (every pass recomputes keys and values for the whole sequence).",
    "not_yet": "Press the button to run it: it decodes the {tokens} tokens twice, and the time without the cache "
    "grows with the square of the length (that is the point).",
    "step_time": "Forward-pass time of each step (thin) and the running median of {smoothing} steps (thick); rare "
    "spikes from other programs may run off the top. With the cache each pass reads one new token; without it, the "
    "whole sequence so far. Step 0 (the prompt) took {first_with:.1f} ms with the cache and {first_without:.1f} ms "
    "without: {first_words}, for the same pass over the prompt. Both run transformers' own forward, so only the "
    "cache differs. This chart's {cached}.",
    "engine_step": " Section 1's run, for comparison: {engine}.",
    "cumulative": "Running total of the same passes: with the cache it grows in a straight line, without it each "
    "step costs more than the last, so the total bends upward (quadratic).",
    "trend": "📏 **In this run** on {model}, a step with the cache took a median of {with_ms:.1f} ms{beside}. "
    "Without it, a step took {first_ms:.1f} ms near the start ({first_words}) and {last_ms:.1f} ms near "
    "the end ({last_words}, {context} tokens recomputed every pass).",
    "beside": " (each timed interleaved with a no-cache pass over the whole sequence; section 1's run, its steps one "
    "after another, took {lean_ms:.2f} ms a step)",
    "same_tokens": "Both ways chose exactly the same tokens: the cache changes the cost, not the result.",
    "tokens_differ": "The tokens differ from step {step}: rounding differences between the two ways of computing made "
    "a near-tie go the other way.",
    "loop": "🔁 **The greedy text loops:** {phrase} comes back {times} times in these {tokens} tokens. Greedy decoding "
    "takes the most likely token every step, and a phrase already said makes itself likely again; a repetition "
    "penalty makes tokens already in the text less likely.",
    "calculator": "KV cache = 2 × layers × KV heads × head dim × **tokens × batch** × bytes per number (a layer with "
    "a sliding window keeps at most its window of tokens; an MLA model caches one compressed latent instead). It "
    "grows with every token of every sequence being served, and can outgrow the weights. At {tokens} tokens in "
    "{dtype}, the formula gives this app's model {bytes:,} bytes: the same formula the real tensors matched above.",
    "calculator_caption": "From each model's published config (sources and notes below) with the formula above, at "
    "{context:,} tokens × batch {batch} in {precision}: sliding-window layers count min(tokens, window). Weights: "
    "parameters × bytes; MoE models count every expert. For an MLA model the light bar is the uncompressed per-head "
    "cache it would need without its latent.",
    "gqa_saving": "**What grouped-query attention saves:** in {model}, {heads} query heads share {kv_heads} KV heads, "
    "so at this length and batch its cache is **{kv} instead of {without}** ({saving:.0f}× less). The light bars "
    "show each model's cache with one K/V head per query head; the tables give the factor.",
    "models": "attention type, heads, KV heads, cache and weight sizes, and MB per token",
    "public_table": "GB = 10⁹ bytes. Window layers keep at most their window (Mistral-7B-v0.1: all 32; Gemma-2: "
    "every other layer); MLA models (DeepSeek-V3) cache a compressed latent instead of per-head keys and values, and "
    "their MHA column is the uncompressed cache. Each model's notes are below.",
    "sources": "each model's config.json and what it keeps differently",
}
WORDS = ("slower than with it", "faster than with it", "about as fast as with it")  # a no-cache step against one
STEP_COLUMNS = {  # the step table's column names as the page shows them
    "tokens_fed": "tokens fed",
    "cache_tokens": "tokens in cache",
    "measured_bytes": "measured bytes",
    "formula_bytes": "formula bytes",
    "agree": "equal",
}


def comparison_sentences(
    comparison: CacheComparison, model: str, cached: Timing, engine: Timing | None, trend_steps: int
) -> dict[str, str]:
    """The step-time caption and (with `trend_steps` steps or more) the trend, from the two runs' own times."""
    steps = comparison.steps
    first = steps.iloc[0]
    said = {
        "step_time": TEXT["step_time"].format(
            smoothing=SMOOTHING_STEPS,
            first_with=first.with_cache_ms,
            first_without=first.without_cache_ms,
            first_words=compare(first.with_cache_ms, first.without_cache_ms).words(
                "more with the cache", "less with the cache", "about the same either way"
            ),
            cached=cached.label(),
        )
        + (TEXT["engine_step"].format(engine=engine.label()) if engine is not None else "")
    }
    if len(steps) >= trend_steps:
        early, late = steps.iloc[1:11], steps.iloc[-10:]  # step 0 is the prompt
        with_times = steps.with_cache_ms.iloc[1:].tolist()
        said["trend"] = TEXT["trend"].format(
            model=model,
            with_ms=cached.median_ms,
            beside=TEXT["beside"].format(lean_ms=engine.median_ms) if engine is not None else "",
            first_ms=early.without_cache_ms.median(),
            first_words=compare(early.without_cache_ms.tolist(), with_times).words(*WORDS),
            last_ms=late.without_cache_ms.median(),
            last_words=compare(late.without_cache_ms.tolist(), with_times).words(*WORDS),
            context=int(late.context_tokens.median()),
        )
    return said
