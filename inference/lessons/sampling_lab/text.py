"""The Sampling lab's sentences as templates, every number filled from the step's logits or the page's draws."""

from __future__ import annotations

import pandas as pd

from inference.core.tokens import markdown_token_text
from inference.sampling.pipeline import SamplingSettings

# The page opens with every classic filter removing something the one before kept (on the bundled model's opening
# prompt: the penalty lowers " happy", T = 0.8 sharpens, top-k keeps 10, top-p 8 of those, min-p 4), so each panel
# of the pipeline chart shows its own stage at work.
OPENING_SETTINGS = SamplingSettings(temperature=0.8, top_k=10, top_p=0.9, min_p=0.2, repetition_penalty=1.3)

TEXT = {
    "intro": "One step's next-token logits for the prompt below, and every knob that turns them into a choice. The "
    "model ran **once**: everything below is recomputed from the logits it stored.",
    "temperature_help": "The temperature of your settings: every chart on this page uses it with your other knobs, "
    "except the temperature chart under “Drag to see it move”, whose own slider shows temperature alone.",
    "live_temperature": "This chart's own slider, under it, sets temperature alone (no other filter, whatever the "
    "Temperature slider above says), precomputed for T = 0 to 2 in steps of 0.05: it moves in your browser with no "
    "trip to the server.",
    "live_top_p": "Top-p with every other setting above applied (penalty {repetition_penalty:g}, T = {temperature:g}, "
    "top-k {top_k}, min-p {min_p:g}); grey = removed by one of them.",
    "acting": "On this page XTC is shown at a step where it acts (a run draws whether it does, with its probability), "
    "and mirostat cuts at its starting μ = 2·τ = {mu:g} bits.",
    "bars": "Raw probability (T=1) beside the final one after every stage; ✂ marks the stage that removed a token.",
    "cumulative": "Cumulative probability by rank: where top-p cuts, and how many tokens remain.",
    "side_by_side": "The same step's probabilities at each temperature (no other filter).",
    "pick_two": "Pick at least two temperatures.",
    "press": "Press the button to draw {draws:,} tokens with the current settings.",
    "draws": "{draws:,} seeded inverse-CDF draws (as Generate does) against the computed probabilities. They differ "
    "by sampling noise only: the whiskers are the 95% band (1.96 standard deviations), where 19 seeds in 20 land. The "
    "top token, {token}, has a computed {computed:.1%}, so its band is ±{band:.1f} points; it got {count:,} of the "
    "{draws:,} draws ({observed:.1%}, {where} the band).",
    "pipeline": "{stages}, in the order set under More samplers (transformers' order unless changed); each panel is "
    "renormalised over the tokens still kept. Every filter starts on, so each panel shows its stage at work; a knob at "
    "its 'off' value (temperature 1, top-p 1, top-k 0, min-p 0, penalty 1) takes it out.",
}


def top_draw(counts: pd.DataFrame, draws: int, band) -> dict:
    """The "draws" sentence's fields for the most likely token (rank 1, never the "other" bucket); `band(p, n)`: the
    half-width of the 95% band of a share of n draws."""
    top = counts[counts["rank"].notna()].iloc[0]
    half = float(band(float(top["computed"]), draws))
    inside = abs(float(top["observed"]) - float(top["computed"])) <= half
    return {
        "draws": draws,
        "token": markdown_token_text(repr(top["token"])),
        "computed": float(top["computed"]),
        "band": 100 * half,
        "count": int(top["count"]),
        "observed": float(top["observed"]),
        "where": "inside" if inside else "outside",
    }
