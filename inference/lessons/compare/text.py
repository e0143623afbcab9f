"""The Compare page's sentences, every number passed in (from the two runs, the order lesson or the many-seed
comparison)."""

from __future__ import annotations

from inference.core.tokens import markdown_token_text
from inference.lessons.compare.shared_draws import BOOTSTRAP_RESAMPLES, ManySeeds, OrderLesson

INTRO = (
    "Every run draws one random number **u** per step from its seed. Runs **A** and **B** share the seed and the "
    "prompt, so they draw the **same u at every step**: the first token where they differ, and everything after "
    "it, comes from the settings (or the model), not from luck."
)

SETTINGS_LABEL = "Settings: seed, length, A's and B's sampling"  # presenter mode's folded settings


def settings_now(chat: bool, seed: int, max_new_tokens: int, sides: dict[str, tuple[str, list[str]]]) -> str:
    """Presenter mode's lines under the folded settings: what both runs share, then each side's model and every
    knob acting on its draw (`sides`: side -> (model choice, `generate.text.knobs_now`'s parts))."""
    shared = (["in the chat template"] if chat else []) + [
        f"seed {seed} (shared)",
        f"at most {max_new_tokens} new tokens",
    ]
    lines = ["Now: " + " · ".join(shared)]
    lines += [f"**{side}**: " + " · ".join([model, *knobs]) for side, (model, knobs) in sides.items()]
    return "  \n".join(lines)


def many_seeds_intro(model_name: str, stop_tokens: list[str]) -> str:
    """What the many-seed comparison measures, naming the loaded model and its own stop tokens (readable labels,
    escaped here)."""
    stops = " or ".join(f"**{markdown_token_text(t)}**" for t in stop_tokens)
    until = f"before {model_name} chooses {stops}" if stops else f"before it stops ({model_name} names no stop token)"
    return (
        "One seed is one text. Run A and B on many seeds (seed i shared by both) and compare what their texts are "
        f"like: how often a 4-token phrase repeats, how varied the word pairs are, how likely the float32 "
        f"{model_name} finds the text, and how long it runs {until} (when any run reaches it before the cap)."
    )


CAPTIONS = {
    "finals": "Both final distributions at that step, from each run's recorded logits and settings; "
    "the outlined bar is the token each run chose.",
    "order": "The first step of A's run where the two orders keep different tokens, found by re-reading "
    "every recorded step under both orders; ✂ marks a token that order removed.",
    "spread": "How each statistic spreads over the runs, A against B.",
    "mirostat": "{side}'s mirostat v2, step by step: the surprise −log₂ p of each chosen token, the cut "
    "μ that step used (tokens more surprising were removed), moving toward τ after every draw.",
}


# The page's sentences with their fields, filled where they show (`steps` as `glossary.plural` says it).
SAYS = {
    "same_text": "Same seed, same text: with these settings A and B chose the same token at every step ({steps}).",
    "shared_u": "Each run's cumulative probability in its own most-likely-first order and the one u = {u:.3f} both "
    "drew: each chose the token where its curve first passes u.",
    "orders_agree": "With A's settings the transformers order and llama.cpp's order keep the same tokens at every "
    "one of the {steps} of A's run. They differ when temperature is not 1 and a filter that reads probabilities "
    "(top-p, min-p, typical-p, XTC) is on: try T = 1.5 with min-p 0.1.",
    "no_verdict": "No verdict: for every statistic the 95% intervals of A and B overlap, so these {seeds} seeds "
    "cannot tell the settings apart.",
}


def orders_differ(lesson: OrderLesson, temperature: float) -> str:
    kept_transformers = lesson.transformers.kept[lesson.transformers.final_stage]
    kept_llama_cpp = lesson.llama_cpp.kept[lesson.llama_cpp.final_stage]
    return (
        f"At **step {lesson.step}** of A's run, A's settings keep **{kept_transformers:,}** tokens in the "
        f"transformers order (temperature {temperature:g} first, then the filters) and **{kept_llama_cpp:,}** in "
        f"llama.cpp's (filters on the T = 1 probabilities, temperature {temperature:g} last): "
        f"{lesson.only_transformers:,} kept only by the first, {lesson.only_llama_cpp:,} only by the second."
    )


def not_yet(seeds: int, max_new_tokens: int) -> str:
    return (
        f"Press the button to write {seeds} texts with A and {seeds} with B ({max_new_tokens} tokens at most "
        "each, all seeds decoded as one batch)."
    )


def intervals_caption(result: ManySeeds, max_new_tokens: int, reference_name: str) -> str:
    """How the interval chart's numbers were made, and what happened to the length statistic."""
    capped_a, capped_b = int((~result.stats_a["stopped"]).sum()), int((~result.stats_b["stopped"]).sum())
    if result.every_run_capped:
        length = (
            f"'Tokens to the stop token' is left out: all {len(result.seeds)} runs of A and all of B reached the "
            f"{max_new_tokens}-token cap without choosing it, so it would compare {max_new_tokens} with "
            f"{max_new_tokens}."
        )
    else:
        length = f"Runs that never chose the stop token count as {max_new_tokens} long (A: {capped_a}, B: {capped_b})."
    return (
        f"{len(result.seeds)} seeded runs per side ({result.seconds:.1f} s here), each up to {max_new_tokens} "
        f"tokens; the interval is a seeded percentile bootstrap ({BOOTSTRAP_RESAMPLES:,} resamples) of the "
        f"recorded runs' mean. {length} Log-probability: the float32 {reference_name} reading each text at T = 1."
    )
