"""Sentences about a run that steps (Generate, and the pages that reuse its Stepper): every number passed in."""

from __future__ import annotations

from dataclasses import fields

from inference.core.run import STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS
from inference.lessons.sampling_lab.knobs import CLASSIC, MORE
from inference.sampling.pipeline import SamplingSettings

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


def stop_sentence(reason: str, max_new_tokens: int, context: int, chooser: str = "the model") -> str:
    """Why a finished run stopped; `chooser` names the model that picks the tokens ("the target")."""
    return {
        STOP_EOS: f"stopped: {chooser} chose its end-of-text token",
        STOP_MAX_NEW_TOKENS: f"stopped: reached max new tokens ({max_new_tokens})",
        STOP_CONTEXT: f"stopped: the model's context of {context} tokens is full",
    }[reason]


# The captions under Generate's charts and its step table (each with its kind: "exact" or "measured").
BARS_CAPTION = (
    "Top tokens by probability from this step's real logits over the full vocabulary; "
    "grey bars = the model's raw probability (T=1), blue = after your settings, orange = the draw, "
    "✂ = removed by that filter; 'other' = the rest of the vocabulary."
)
BARS_CAPTION_REMOTE = (
    "Top tokens by probability from the engine's answer for this step (the note below says whether it holds the "
    "whole vocabulary); grey bars = the model's raw probability (T=1), blue = after your settings, orange = the "
    "draw, ✂ = removed by that filter; 'other' = the rest of the vocabulary."
)
CUMULATIVE_CAPTION = (
    "Tokens in order, adding up their probability. Top-p keeps tokens until the "
    "red line is reached; the draw picks a random u and takes the token where the blue curve passes u."
)
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
