"""What the Start here page says: one dict of Markdown templates, every number from the first look."""

from __future__ import annotations

from inference.lessons.start.first_look import FirstLook

TEXT = {
    "intro": "Inference is running a trained model to get text out of it. Below, **{name}** ({millions:,.1f} M "
    "parameters) continues one prompt, and each step shows a real result from that run. Each page in the sidebar "
    "goes deeper into one step; walk them top to bottom.",
    "tokens": "The prompt *{prompt}* is read as **{count} tokens**: {chips}",
    "scores": "The model gives each of its **{vocab:,} tokens** a probability for what comes next. The most likely: "
    "{top}.",
    "greedy": "Greedy decoding always takes the top token, {token} ({probability}). Sampling draws a number u between "
    "0 and 1 from the run's seed and takes the token where the running total of the probabilities, most likely "
    "first, passes u. At temperature {temperature:g} the {held_by} {held} of the probability{fewer}; {seeds} seeds "
    "drew:\n\n{lines}\n\n{typical} of these {seeds} draws landed {where}, as {held} of all draws do on average."
    "{rarest} The chosen token is appended and the loop starts again.",
    "held_by_one": "most likely token holds",
    "held_by_many": "{half} most likely tokens hold",
    "fewer_one": ", at least half",
    "fewer_many": " (the top {short} alone {verb} {short_mass}: {half} is the fewest top tokens where half of all "
    "draws land)",
    "draw": "- seed {d.seed}: u = {d.u:.3f} → {token} ({probability}, rank {d.rank:,}): {how_rare}",
    "usual_one": "the most likely token, where {mass} of all draws land",
    "usual_many": "among the {half} most likely, where {mass} of all draws land",
    "rare": "{far} of draws land this far down the list or further (one in {d.one_in:,})",
    "rarest": " The rarest, seed {d.seed}'s, reaches rank {d.rank:,}: about one draw in {d.one_in:,} goes that far "
    "down.",
    "timing": "The first pass read all {count} prompt tokens at once in **{prefill:.1f} ms** (prefill); one more token "
    "then took **{decode:.1f} ms** (a decode step). A reply of a hundred tokens is a hundred decode steps: that is "
    "where the time goes.",
    "cache": "After the prompt, the cache holds **{bytes:,} bytes**, read from its tensors; {formula}. It grows with "
    "every token, so a decode step computes one token's keys and values instead of the whole text's.",
    "formula": "2 (keys and values) × {l.kv.layers} layers × {l.kv.kv_heads} KV heads × {l.kv.head_dim} dims × "
    "{l.cache_tokens} tokens × {l.kv.bytes_per_element} bytes = {l.formula_bytes:,}",
    "formula_other": "the formula for this model's layers (sliding windows or a latent cache) gives {l.formula_bytes:,}",
    "caption": "One run of {name} on this machine, computed once per model and kept. Steps 1–3 and 5 are exact (the "
    "model's own outputs and cache tensors); the times in step 4 are the median of {runs} runs, timed by the step "
    "engine, and move a little with what else this machine is doing.",
}


def percent(p: float) -> str:
    """A probability readable at any size: 43.0%, 0.012% (a rare draw must not read 0.0%)."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def chip(token: str) -> str:
    """A readable token as inline code (a backtick inside it would end the code span)."""
    return f"`{token.replace('`', 'ˋ')}`"


def choosing(look: FirstLook, temperature: float) -> str:
    """Step 3: greedy against a few seeded draws, with how usual each draw is, computed from the distribution."""
    half, mass = look.half_of_draws_within, percent(look.half_mass)
    usual = TEXT["usual_one" if half == 1 else "usual_many"].format(half=half, mass=mass)
    lines = "\n".join(
        TEXT["draw"].format(
            d=d,
            token=chip(d.token),
            probability=percent(d.probability),
            how_rare=usual if d.rank <= half else TEXT["rare"].format(far=percent(d.this_far_down), d=d),
        )
        for d in look.draws
    )
    rarest = max(look.draws, key=lambda d: d.rank)
    return TEXT["greedy"].format(
        token=chip(look.greedy_token),
        probability=percent(look.greedy_probability),
        temperature=temperature,
        held_by=TEXT["held_by_one" if half == 1 else "held_by_many"].format(half=half),
        held=mass,
        fewer=TEXT["fewer_one" if half == 1 else "fewer_many"].format(
            short="one" if half == 2 else half - 1,
            verb="holds" if half == 2 else "hold",
            short_mass=percent(look.short_of_half_mass),
            half=half,
        ),
        seeds=len(look.draws),
        lines=lines,
        typical=sum(d.rank <= half for d in look.draws),
        where="on the top token" if half == 1 else f"among the top {half}",
        rarest=TEXT["rarest"].format(d=rarest) if rarest.rank > half else "",
    )
