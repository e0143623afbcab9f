"""Which step Generate shows under the text, and its view: the choice about to be made while the run goes on (its
ranking kept for the Step that draws it, `Trace.ranked_next`), else the last choice made."""

from __future__ import annotations

import torch

from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import StepView, step_view


def current_step_view(trace, logits: torch.Tensor | None, settings: SamplingSettings) -> tuple[StepView, str]:
    """(view, heading): `logits` are the coming step's (`trace.peek()`), or None once the run stopped. The caller
    holds the session's lock: the view reads the trace."""
    if logits is not None:
        context = trace.step_context(trace.next_index, settings) if settings.needs_context else None
        ranked = trace.ranked_next(settings, context)  # kept: the Step that draws it need not rank again
        view = step_view(logits, settings, trace.seen_now(), u=trace.next_uniform(), context=context, ranked=ranked)
        return view, f"Step {trace.next_index}: the choice about to be made"
    last = trace.records[-1]
    context = trace.step_context(last.index, settings) if settings.needs_context else None
    view = step_view(last.logits, settings, trace.seen_masks()[-1], u=last.u, chosen_id=last.token_id, context=context)
    return view, f"Step {last.index}: the last choice"
