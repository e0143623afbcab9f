"""Step views: over recorded steps they agree with the engine's own draws, and their shares add up."""

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.sampling.pipeline import SamplingSettings, seen_mask
from inference.sampling.step_view import sample_many, step_view, trace_summary

pytestmark = pytest.mark.unit

SETTINGS = SamplingSettings(temperature=0.9, top_k=40, top_p=0.9, repetition_penalty=1.1)


def recorded(bundled, n=25, seed=4):
    trace = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "One day, a boy"), n, seed)
    list(trace.run(SETTINGS))
    return trace


def test_trace_summary_under_the_recorded_settings_redraws_the_recorded_tokens(bundled):
    """Re-reading a trace with the settings it was made with gives back every choice."""
    trace = recorded(bundled)
    us = torch.tensor([r.u for r in trace.records], dtype=torch.float64)
    ids = torch.tensor(trace.generated_ids)
    summary = trace_summary(trace.logits_matrix(), trace.seen_masks(), SETTINGS, us, ids)
    assert summary["would_draw_id"].tolist() == trace.generated_ids
    assert list(summary["recorded_prob_now"].round(12)) == [round(r.prob, 12) for r in trace.records]
    assert list(summary["tokens_kept"]) == [r.kept for r in trace.records]
    assert list(summary["recorded_rank_now"]) == [r.rank + 1 for r in trace.records]


def test_step_view_of_a_recorded_step_marks_the_recorded_choice(bundled):
    trace = recorded(bundled)
    seen = trace.seen_masks()
    for r in trace.records[:5]:
        view = step_view(r.logits, SETTINGS, seen[r.index], u=r.u)
        assert view.chosen_id == r.token_id and view.chosen_rank == r.rank
        assert abs(view.entropy_final_bits - r.entropy_bits) < 1e-9


def test_sample_many_counts_every_draw_and_only_kept_tokens(bundled):
    trace = recorded(bundled, n=1)
    view = step_view(trace.records[0].logits, SamplingSettings(temperature=1.0, top_k=5), trace.seen_masks()[0])
    counts = sample_many(view, 1000, seed=1, top_n=10)
    assert counts["count"].sum() == 1000
    assert counts["count"].iloc[5:].sum() == 0  # top-k 5: nothing beyond rank 5 is ever drawn
    assert abs(counts["computed"].sum() - 1) < 1e-9


def test_view_reports_nucleus_and_other_mass(bundled):
    """The view's nucleus, kept counts and the 'other' row add up over the full vocabulary."""
    logits = torch.randn(len(bundled.tokenizer), generator=torch.Generator().manual_seed(4)) * 3
    view = step_view(logits, SamplingSettings(temperature=1.0, top_p=0.7), seen_mask([], len(logits)), u=0.3)
    full = logits.softmax(-1).sort(descending=True).values.double()
    n = int((full.cumsum(0) < 0.7).sum()) + 1  # smallest prefix whose mass reaches 0.7
    assert view.nucleus_size == n == view.kept["top_p"]
    assert view.nucleus_mass >= 0.7 and view.nucleus_mass - float(full[n - 1]) < 0.7
    table = view.table(bundled.tokenizer, top_n=10)
    assert len(table) == 11 and abs(table["raw"].sum() - 1) < 1e-9 and abs(table["min_p"].sum() - 1) < 1e-9
    assert table.iloc[-1]["raw"] == pytest.approx(1 - float(full[:10].sum()))
