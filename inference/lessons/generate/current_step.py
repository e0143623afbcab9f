"""Which step Generate shows under the text, and its view: the choice about to be made while the run goes on (its
ranking kept for the Step that draws it, `Trace.ranked_next`), else the last choice made."""

from __future__ import annotations

import torch

from inference.lessons.generate.text import settings_changed
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import StepView, step_view


def current_step_view(trace, logits: torch.Tensor | None, settings: SamplingSettings) -> tuple[StepView, str, str]:
    """(view, heading, note): `logits` are the coming step's (`trace.peek()`), or None once the run stopped. A
    stopped run shows its last draw under the settings it was drawn with (its u lands on that curve, not on the one
    the sliders would give now), and `note` says what the sliders changed since. The caller holds the session's
    lock: the view reads the trace."""
    if logits is not None:
        context = trace.step_context(trace.next_index, settings) if settings.needs_context else None
        ranked = trace.ranked_next(settings, context)  # kept: the Step that draws it need not rank again
        view = step_view(logits, settings, trace.seen_now(), u=trace.next_uniform(), context=context, ranked=ranked)
        return view, f"Step {trace.next_index}: the choice about to be made", ""
    last = trace.records[-1]
    drawn_with = last.settings
    context = trace.step_context(last.index, drawn_with) if drawn_with.needs_context else None
    view = step_view(
        last.logits, drawn_with, trace.seen_masks()[-1], u=last.u, chosen_id=last.token_id, context=context
    )
    then, now = settings_changed(drawn_with, settings)
    if not then:
        return view, f"Step {last.index}: the last choice", ""
    note = f"The sliders now say {now}: a new run (Reset) or a fork draws with them; this chart shows the draw as made."
    return view, f"Step {last.index}: the last choice, as drawn ({then})", note
