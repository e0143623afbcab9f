"""Generate's sentences as templates (and the pages that reuse its Stepper), every number filled from the run."""

from __future__ import annotations

from dataclasses import fields

from inference.core.run import STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS
from inference.lessons.palette import COLOUR_WORDS
from inference.lessons.sampling_lab.knobs import CLASSIC, MORE
from inference.sampling.pipeline import ORDER_PRESETS, TRANSFORMERS_ORDER, SamplingSettings

_BARS_KEY = (
    "{raw} bars = the model's raw probability (T=1), {final} = after your settings, {chosen} = the draw, "
    "✂ = removed by that filter; 'other' = the rest of the vocabulary."
).format(**COLOUR_WORDS)
TEXT = {
    "intro": "The model reads your prompt and gives a probability to **every** token in its vocabulary. One is "
    "drawn, appended, and fed back in: that is the whole loop. Press **Step** to make one choice, **Play** to run to "
    "the end.",
    "seed_help": "The same seed, prompt and settings give the same tokens on this server. Another machine or thread "
    "count can round a near-tie the other way and take another path from there.",
    "fork": "Keeps steps before it and re-chooses that token with the current sliders. Its logits are reused: the "
    "prefix is not recomputed.",
    "settings_label": "Settings: template, seed, temperature, top-p, …",  # presenter mode's folded settings
    "now": "Now: {parts} · seed {seed} · at most {max_new} new tokens",
    "next": "next: step {step}",
    STOP_EOS: "stopped: {chooser} chose its end-of-text token",
    STOP_MAX_NEW_TOKENS: "stopped: reached max new tokens ({max_new})",
    STOP_CONTEXT: "stopped: the model's context of {context} tokens is full",
    "coming": "Step {step}: the choice about to be made",
    "last": "Step {step}: the last choice",
    "last_then": "Step {step}: the last choice, as drawn ({then})",
    "changed": "The sliders now say {now}: a new run (Reset) or a fork draws with them; this chart shows the draw as "
    "made.",
    "bars": "Top tokens by probability from this step's real logits over the full vocabulary; " + _BARS_KEY,
    "bars_remote": "Top tokens by probability from the engine's answer for this step (the note below says whether it "
    "holds the whole vocabulary); " + _BARS_KEY,
    "cumulative": "Tokens in order, adding up their probability. Top-p keeps tokens until the {cutoff} line is "
    "reached; the draw picks a random u and takes the token where the {final} curve passes u.".format(**COLOUR_WORDS),
    "table_remote": "Forward ms is the engine's own time to evaluate that step's new tokens (its `timings.prompt_ms`; "
    "its prompt cache kept the rest). The CSV adds round_trip_ms (the whole request measured here, answer parsed) and "
    "the tokens the engine evaluated and reused.",
    "table_local": "Probabilities are exact; forward ms is the wall time of that step's forward pass here. It runs "
    "while your browser draws this page, so a step can take many times its usual time when both share one "
    "computer's CPU; the Prefill vs decode page times clean runs.",
}
_KNOB_NAMES = {knob.field: knob.label for knob in CLASSIC + MORE} | {"temperature": "T"}


def settings_changed(then: SamplingSettings, now: SamplingSettings) -> tuple[str, str]:
    """The settings that differ, as drawn and as the sliders say now ("T = 0.8", "T = 2"); ("", "") when none do."""
    changed = [f.name for f in fields(SamplingSettings) if getattr(then, f.name) != getattr(now, f.name)]

    def said(settings: SamplingSettings) -> str:
        named = [
            f"{_KNOB_NAMES[name]} = {value:g}" if isinstance(value, (int, float)) else f"{_KNOB_NAMES[name]} {value}"
            for name in changed
            if name in _KNOB_NAMES and not isinstance(value := getattr(settings, name), bool)
        ]
        return ", ".join(named or ["other settings"])

    return (said(then), said(now)) if changed else ("", "")


def knobs_now(settings: SamplingSettings) -> list[str]:
    """The temperature and every knob away from its default (mirostat's τ and η only while it is on), and the
    stage order when it is not transformers' (a preset by its name)."""
    parts = [f"temperature {settings.temperature:g}" if not settings.greedy else "temperature 0 (greedy)"]
    for knob in CLASSIC[1:] + MORE:
        value = getattr(settings, knob.field)
        if (settings.mirostat or not knob.field.startswith("mirostat_")) and value != knob.default:
            name = knob.label if knob.label[:2].isupper() else knob.label[:1].lower() + knob.label[1:]  # XTC stays
            parts.append(f"{name} {value:g}")
    if settings.mirostat:
        parts.append("mirostat v2")
    if tuple(settings.order) != TRANSFORMERS_ORDER:
        preset = next((name for name, order in ORDER_PRESETS.items() if order == tuple(settings.order)), None)
        parts.append(f"stage order: {preset}" if preset else "stage order: " + ", ".join(settings.order))
    return parts
