"""Which step Generate shows under the text, and its view: the choice about to be made while the run goes on (its
ranking kept for the Step that draws it, `Trace.ranked_next`), else the last choice made."""

from __future__ import annotations

import torch

from inference.lessons.generate.text import TEXT, settings_changed
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import StepView, step_view


def current_step_view(trace, logits: torch.Tensor | None, settings: SamplingSettings) -> tuple[StepView, str, str]:
    """(view, heading, note) for the coming step's `logits`, or (None) the last draw under the settings it was drawn
    with (its u lands on that curve), `note` naming what the sliders changed since. The caller holds the lock."""
    if logits is not None:
        context = trace.step_context(trace.next_index, settings) if settings.needs_context else None
        ranked = trace.ranked_next(settings, context)  # kept: the Step that draws it need not rank again
        view = step_view(logits, settings, trace.seen_now(), u=trace.next_uniform(), context=context, ranked=ranked)
        return view, TEXT["coming"].format(step=trace.next_index), ""
    last = trace.records[-1]
    drawn_with = last.settings
    context = trace.step_context(last.index, drawn_with) if drawn_with.needs_context else None
    view = step_view(
        last.logits,
        drawn_with,
        seen_mask(trace.all_ids[:-1], trace.vocab_size),
        u=last.u,
        chosen_id=last.token_id,
        context=context,
    )
    then, now = settings_changed(drawn_with, settings)
    if not then:
        return view, TEXT["last"].format(step=last.index), ""
    return view, TEXT["last_then"].format(step=last.index, then=then), TEXT["changed"].format(now=now)
