"""Same luck's sentences as templates, every number filled from the two runs, the order lesson or the many seeds."""

TEXT = {
    "intro": "Every run draws one random number **u** per step from its seed. Runs **A** and **B** share the seed and "
    "the prompt, so they draw the **same u at every step**: the first token where they differ, and everything after "
    "it, comes from the settings (or the model), not from luck.",
    "settings_label": "Settings: seed, length, A's and B's sampling",  # presenter mode's folded settings
    "now": "Now: {chat}seed {seed} (shared) · at most {max_new} new tokens",
    "now_side": "**{side}**: {model} · {knobs}",
    # why A and B parted at a step, with that step's numbers
    "removed": "{side}'s {stage} removed {removed}, the token u = {u:.3f} landed on in {other}, so on {side}'s curve "
    "u fell on {chosen}.",
    "moved": "Both kept both tokens, but {cause} moved the curve: the tokens ranked before {tok_a} hold {before_b:.1%} "
    "in B against {before_a:.1%} in A, so the shared u = {u:.3f} fell on {tok_b} in B and on {tok_a} in A.",
    "parted": "**They part at step {step}** (boxed above): {reason}",
    "same_text": "Same seed, same text: with these settings A and B chose the same token at every step ({steps}).",
    "finals": "Both final distributions at that step, from each run's recorded logits and settings; the outlined bar "
    "is the token each run chose.",
    "shared_u": "Each run's cumulative probability in its own most-likely-first order and the one u = {u:.3f} both "
    "drew: each chose the token where its curve first passes u.",
    "mirostat": "{side}'s mirostat v2, step by step: the surprise −log₂ p of each chosen token, the cut μ that step "
    "used (tokens more surprising were removed), moving toward τ after every draw.",
    "orders_agree": "With A's settings the transformers order and llama.cpp's order keep the same tokens at every "
    "one of the {steps} of A's run. They differ when temperature is not 1 and a filter that reads probabilities "
    "(top-p, min-p, typical-p, XTC) is on: try T = 1.5 with min-p 0.1.",
    "orders_differ": "At **step {step}** of A's run, A's settings keep **{kept_t:,}** tokens in the transformers order "
    "(temperature {t:g} first, then the filters) and **{kept_l:,}** in llama.cpp's (filters on the T = 1 "
    "probabilities, temperature {t:g} last): {only_t:,} kept only by the first, {only_l:,} only by the second.",
    "order": "The first step of A's run where the two orders keep different tokens, found by re-reading every "
    "recorded step under both orders; ✂ marks a token that order removed.",
    "many_intro": "One seed is one text. Run A and B on many seeds (seed i shared by both) and compare what their "
    "texts are like: how often a 4-token phrase repeats, how varied the word pairs are, how likely the float32 "
    "{model} finds the text, and how long it runs {until} (when any run reaches it before the cap).",
    "until_stop": "before {model} chooses {stops}",
    "until_none": "before it stops ({model} names no stop token)",
    "not_yet": "Press the button to write {seeds} texts with A and {seeds} with B ({max_new} tokens at most each, all "
    "seeds decoded as one batch).",
    "verdict": "{higher} has the higher {label}: {high:.3g} against {low:.3g} for {lower} (95% intervals do not "
    "overlap).",
    "no_verdict": "No verdict: for every statistic the 95% intervals of A and B overlap, so these {seeds} seeds "
    "cannot tell the settings apart.",
    "intervals": "{seeds} seeded runs per side ({seconds:.1f} s here), each up to {max_new} tokens; the interval is a "
    "seeded percentile bootstrap ({resamples:,} resamples) of the recorded runs' mean. {length} Log-probability: the "
    "float32 {model} reading each text at T = 1.",
    "length_left_out": "'Tokens to the stop token' is left out: all {seeds} runs of A and all of B reached the "
    "{max_new}-token cap without choosing it, so it would compare {max_new} with {max_new}.",
    "length_capped": "Runs that never chose the stop token count as {max_new} long (A: {capped_a}, B: {capped_b}).",
    "spread": "How each statistic spreads over the runs, A against B.",
}
