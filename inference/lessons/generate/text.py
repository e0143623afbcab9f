"""Sentences about a run that steps (Generate, and the pages that reuse its Stepper): every number passed in."""

from __future__ import annotations

from dataclasses import fields

from inference.core.run import STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS
from inference.lessons.palette import COLOUR_WORDS
from inference.lessons.sampling_lab.knobs import CLASSIC, MORE
from inference.sampling.pipeline import ORDER_PRESETS, TRANSFORMERS_ORDER, SamplingSettings

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


INTRO = (
    "The model reads your prompt and gives a probability to **every** token in its vocabulary. "
    "One is drawn, appended, and fed back in: that is the whole loop. Press **Step** to make one "
    "choice, **Play** to run to the end."
)
SEED_HELP = (
    "The same seed, prompt and settings give the same tokens on this server. Another machine or "
    "thread count can round a near-tie the other way and take another path from there."
)
FORK_NOTE = (
    "Keeps steps before it and re-chooses that token with the current sliders. "
    "Its logits are reused: the prefix is not recomputed."
)
SETTINGS_LABEL = "Settings: template, seed, temperature, top-p, …"  # presenter mode's folded settings


def knobs_now(settings: SamplingSettings) -> list[str]:
    """The temperature, and every other knob away from its 'off' value (its default), by its label (mirostat's τ
    and η only while mirostat is on), and the stage order when it is not transformers' (a preset by its name)."""
    parts = [f"temperature {settings.temperature:g}" if not settings.greedy else "temperature 0 (greedy)"]
    for knob in CLASSIC[1:] + MORE:
        value = getattr(settings, knob.field)
        acting = settings.mirostat or not knob.field.startswith("mirostat_")
        if acting and value != knob.default:
            name = knob.label if knob.label[:2].isupper() else knob.label[:1].lower() + knob.label[1:]  # XTC stays
            parts.append(f"{name} {value:g}")
    if settings.mirostat:
        parts.append("mirostat v2")
    if tuple(settings.order) != TRANSFORMERS_ORDER:
        preset = next((name for name, order in ORDER_PRESETS.items() if order == tuple(settings.order)), None)
        parts.append(f"stage order: {preset}" if preset else "stage order: " + ", ".join(settings.order))
    return parts


def settings_now(settings: SamplingSettings, chat: bool, seed: int, max_new_tokens: int) -> str:
    """Presenter mode's line under the folded settings: every setting acting on the draw (`knobs_now`), the
    template, the seed and the length."""
    parts = (["in the chat template"] if chat else []) + knobs_now(settings)
    return "Now: " + " · ".join([*parts, f"seed {seed}", f"at most {max_new_tokens} new tokens"])


def stop_sentence(reason: str, max_new_tokens: int, context: int, chooser: str = "the model") -> str:
    """Why a finished run stopped; `chooser` names the model that picks the tokens ("the target")."""
    return {
        STOP_EOS: f"stopped: {chooser} chose its end-of-text token",
        STOP_MAX_NEW_TOKENS: f"stopped: reached max new tokens ({max_new_tokens})",
        STOP_CONTEXT: f"stopped: the model's context of {context} tokens is full",
    }[reason]


# The captions under Generate's charts and its step table; the colours named as the palette draws them.
_BARS_KEY = (
    "{raw} bars = the model's raw probability (T=1), {final} = after your settings, {chosen} = the draw, "
    "✂ = removed by that filter; 'other' = the rest of the vocabulary."
).format(**COLOUR_WORDS)
BARS_CAPTION = "Top tokens by probability from this step's real logits over the full vocabulary; " + _BARS_KEY
BARS_CAPTION_REMOTE = (
    "Top tokens by probability from the engine's answer for this step (the note below says whether it holds the "
    "whole vocabulary); " + _BARS_KEY
)
CUMULATIVE_CAPTION = (
    "Tokens in order, adding up their probability. Top-p keeps tokens until the {cutoff} line is reached; the draw "
    "picks a random u and takes the token where the {final} curve passes u."
).format(**COLOUR_WORDS)
TABLE_CAPTION_REMOTE = (
    "Forward ms is the engine's own time to evaluate that step's new tokens (its "
    "`timings.prompt_ms`; its prompt cache kept the rest). The CSV adds round_trip_ms (the whole "
    "request measured here, answer parsed) and the tokens the engine evaluated and reused."
)
TABLE_CAPTION_LOCAL = (
    "Probabilities are exact; forward ms is the wall time of that step's forward pass here. "
    "It runs while your browser draws this page, so a step can take many times its usual time when "
    "both share one computer's CPU; the Prefill vs decode page times clean runs."
)


def status_lead(trace) -> str:
    """What the run holds, for the status line under its text."""
    return f"{len(trace.prompt_ids)} prompt tokens · {len(trace.records)} generated"
