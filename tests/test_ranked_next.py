"""`Trace.ranked_next`: a page's view of the coming step ranks the vocabulary, and the Step that draws it reuses that
ranking where `draw` can (top-p sorted everything). The records must be the same to the last bit as a trace that
never kept one, and the ranking must be computed once per step, not twice."""

import dataclasses

import pytest

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.sampling import pipeline
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

pytestmark = pytest.mark.unit

SETTINGS = {
    "top-p (sorts everything)": SamplingSettings(temperature=0.7, top_p=0.9),
    "top-p with a penalty": SamplingSettings(temperature=1.1, top_p=0.95, repetition_penalty=1.3),
    "top-k (a partial sort)": SamplingSettings(temperature=0.8, top_k=20),
    "greedy": SamplingSettings(temperature=0.0),
    "min-p": SamplingSettings(temperature=1.0, min_p=0.05),
}
STEPS = 25


def record_fields(trace) -> list[tuple]:
    return [(r.token_id, r.rank, r.prob, r.u, tuple(r.alternatives), r.entropy_bits, r.kept) for r in trace.records]


def page_like_run(model, tokenizer, settings, change_at: int | None = None):
    """What Generate does: view the coming step with the kept ranking, then Step (settings may change in between)."""
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, "Once upon a time"), STEPS, 3)
    for step in range(STEPS):
        if trace.finished:
            break
        view = step_view(trace.peek(), settings, trace.seen_now(), u=trace.next_uniform(),
                         ranked=trace.ranked_next(settings))  # fmt: skip
        assert view.chosen_id == step_view(trace.peek(), settings, trace.seen_now(), u=trace.next_uniform()).chosen_id
        trace.step(dataclasses.replace(settings, temperature=1.3) if step == change_at else settings)
    return trace


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_kept_ranking_gives_the_same_records_to_the_last_bit(bundled, name):
    settings = SETTINGS[name]
    plain = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), STEPS, 3)
    list(plain.run(settings))
    assert record_fields(page_like_run(bundled.model, bundled.tokenizer, settings)) == record_fields(plain)


def test_settings_changed_after_the_view_are_drawn_with_a_fresh_ranking(bundled):
    settings = SETTINGS["top-p (sorts everything)"]
    plain = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), STEPS, 3)
    for step in range(STEPS):
        plain.step(dataclasses.replace(settings, temperature=1.3) if step == 10 else settings)
    assert record_fields(page_like_run(bundled.model, bundled.tokenizer, settings, change_at=10)) == record_fields(
        plain
    )


def test_the_vocabulary_is_ranked_once_a_step_where_top_p_sorts_it(bundled, monkeypatch):
    calls = []
    real = pipeline.ranked_stages
    monkeypatch.setattr(pipeline, "ranked_stages", lambda *a, **k: calls.append(1) or real(*a, **k))
    import inference.core.run as run

    monkeypatch.setattr(run, "ranked_stages", pipeline.ranked_stages)
    trace = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, "Once upon a time"), 10, 3)
    settings = SETTINGS["top-p (sorts everything)"]
    for _ in range(10):
        trace.ranked_next(settings)
        trace.step(settings)
    assert len(calls) == 10  # ranked_next's; each draw reused it
    calls.clear()
    trace.back()
    trace.ranked_next(settings)
    trace.back()  # the pass it ranked is gone: the draw must rank its own
    trace.step(settings)
    assert len(calls) == 2
