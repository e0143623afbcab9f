"""The Sampling lab's sentences and opening settings, every number passed in (from the step's logits or the
draws the page made)."""

from __future__ import annotations

import pandas as pd

from inference.core.tokens import markdown_token_text
from inference.sampling.pipeline import SamplingSettings

# The page opens with every classic filter on, each set so that it removes something the one before kept (on the
# bundled model's opening prompt, `inference.core.prompting.OPENING_PROMPTS["sampling"]`: the penalty lowers
# " happy", already in the text; T = 0.8 sharpens; top-k keeps 10 of 4,096; top-p 8 of those; min-p 4), so that
# each panel of the pipeline chart shows its own stage at work.
OPENING_SETTINGS = SamplingSettings(temperature=0.8, top_k=10, top_p=0.9, min_p=0.2, repetition_penalty=1.3)

# Two temperature sliders on one page: the page's (with every other knob) and the first live chart's own (alone).
PAGE_TEMPERATURE_HELP = (
    "The temperature of your settings: every chart on this page uses it with your other knobs, except the "
    "temperature chart under “Drag to see it move”, whose own slider shows temperature alone."
)
LIVE_TEMPERATURE_CAPTION = (
    "This chart's own slider, under it, sets temperature alone (no other filter, whatever the Temperature slider "
    "above says), precomputed for T = 0 to 2 in steps of 0.05: it moves in your browser with no trip to the server."
)

# Two lines on a projector: the first chart has to reach the first screen at 800x1000 in presenter mode.
INTRO = (
    "One step's next-token logits for the prompt below, and every knob that turns them into a choice. The model "
    "ran **once**: "
    "everything below is recomputed from the logits it stored."
)
# Said where it shows, under the pipeline's panels.
STAGES_START_ON = (
    "Every filter starts on, so each panel shows its stage at work; a knob at its 'off' value (temperature 1, "
    "top-p 1, top-k 0, min-p 0, penalty 1) takes it out."
)


def draws_caption(counts: pd.DataFrame, draws: int, band) -> str:
    """How the draws compare with the computed probabilities, naming the most likely token (rank 1), never the
    "other" bucket. `counts`: `sample_many`'s table with a `token` column (readable names, "other" last);
    `band(p, draws)`: the half-width of the 95% band of a share of draws at probability p."""
    tokens = counts[counts["rank"].notna()]
    top = tokens.iloc[0]
    half = float(band(float(top["computed"]), draws))
    inside = abs(float(top["observed"]) - float(top["computed"])) <= half
    return (
        f"{draws:,} seeded inverse-CDF draws (as Generate does) against the computed probabilities. They differ by "
        "sampling noise only: the whiskers are the 95% band (1.96 standard deviations), where 19 seeds in 20 land. "
        f"The top token, {markdown_token_text(repr(top['token']))}, has a computed {float(top['computed']):.1%}, so its band is "
        f"±{100 * half:.1f} points; it got {int(top['count']):,} of the {draws:,} draws "
        f"({float(top['observed']):.1%}, {'inside' if inside else 'outside'} the band)."
    )


def settings_caption(settings: SamplingSettings) -> str:
    """The settings every other knob holds, for the top-p chart's caption."""
    return (
        f"Top-p with every other setting above applied (penalty {settings.repetition_penalty:g}, "
        f"T = {settings.temperature:g}, top-k {settings.top_k or 'off'}, min-p {settings.min_p:g}); "
        "grey = removed by one of them."
    )
