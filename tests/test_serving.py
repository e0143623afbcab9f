"""Serving: the traffic trace, statistics from recorded timestamps."""

import numpy as np
import pandas as pd
import pytest

from inference.lessons.serving.request_trace import SHAPES, poisson_trace
from inference.lessons.serving.stats import (
    SLO,
    RequestRecord,
    RunSummary,
    knee_index,
    percentile,
    request_table,
    summarize,
)

pytestmark = pytest.mark.unit


def test_trace_is_reproducible_from_its_seed():
    """The same settings and seed give the same trace; another seed gives another."""
    a = poisson_trace("short chat", 2.0, 20, seed=7, vocab_size=4096)
    b = poisson_trace("short chat", 2.0, 20, seed=7, vocab_size=4096)
    c = poisson_trace("short chat", 2.0, 20, seed=8, vocab_size=4096)
    assert a == b
    assert a.requests != c.requests


def test_trace_rate_only_rescales_the_clock():
    """Two rates with one seed: same prompts and lengths, arrival times scaled by the rate ratio."""
    slow = poisson_trace("long document", 1.0, 12, seed=3, vocab_size=4096)
    fast = poisson_trace("long document", 4.0, 12, seed=3, vocab_size=4096)
    assert [r.prompt_ids for r in slow.requests] == [r.prompt_ids for r in fast.requests]
    assert [r.reply_tokens for r in slow.requests] == [r.reply_tokens for r in fast.requests]
    assert [r.arrival_s / 4 for r in slow.requests] == pytest.approx([r.arrival_s for r in fast.requests])


def test_trace_arrivals_are_poisson_at_the_asked_rate():
    """Many gaps: mean 1/λ and coefficient of variation 1 (exponential), lengths inside the shape's range."""
    trace = poisson_trace("short chat", 5.0, 20_000, seed=1, vocab_size=4096)
    gaps = np.diff([r.arrival_s for r in trace.requests])
    assert trace.requests[0].arrival_s == 0.0
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)
    shape = SHAPES["short chat"]
    prompts = [r.prompt_tokens for r in trace.requests]
    replies = [r.reply_tokens for r in trace.requests]
    assert shape.prompt.low <= min(prompts) and max(prompts) <= shape.prompt.high
    assert shape.reply.low <= min(replies) and max(replies) <= shape.reply.high
    assert np.median(replies) == pytest.approx(shape.reply.median, abs=1)


def test_trace_prompts_start_with_the_start_token_and_stay_in_the_vocabulary():
    """Each prompt opens with the start token; the rest are ordinary ids."""
    trace = poisson_trace("long document", 1.0, 5, seed=0, vocab_size=300)
    for request in trace.requests:
        assert request.prompt_ids[0] == 0
        assert all(0 < t < 300 for t in request.prompt_ids[1:])


def test_trace_rejects_bad_settings_with_a_message():
    """A zero rate, no requests or an unknown shape: a clear ValueError."""
    with pytest.raises(ValueError, match="rate"):
        poisson_trace("short chat", 0, 5, seed=0, vocab_size=10)
    with pytest.raises(ValueError, match="at least 1"):
        poisson_trace("short chat", 1, 0, seed=0, vocab_size=10)
    with pytest.raises(ValueError, match="short chat"):
        poisson_trace("poetry", 1, 5, seed=0, vocab_size=10)


def _record(index, sent, times, asked=None):
    return RequestRecord(
        index=index, sent_s=sent, token_times_s=tuple(times), asked_tokens=len(times) if asked is None else asked
    )


def test_percentiles_from_recorded_timestamps_match_a_hand_computed_example():
    """Five requests with TTFTs 0.1..0.4 and 1.0 s: p50 0.3 s, p95 0.4 + 0.8 x 0.6 = 0.88 s; TPOT and e2e by hand."""
    records = [
        _record(0, 0.0, [0.1, 0.2, 0.3]),  # TTFT 0.1, TPOT 0.1, e2e 0.3
        _record(1, 1.0, [1.2, 1.25]),  # TTFT 0.2, TPOT 0.05, e2e 0.25
        _record(2, 2.0, [2.3, 2.5, 2.7, 2.9]),  # TTFT 0.3, TPOT 0.2, e2e 0.9
        _record(3, 2.5, [2.9, 3.0]),  # TTFT 0.4, TPOT 0.1, e2e 0.5
        _record(4, 3.0, [4.0]),  # TTFT 1.0, no TPOT (one token), e2e 1.0
    ]
    summary = summarize(records, SLO(ttft_s=0.35))
    assert summary.ttft_s[50] == pytest.approx(0.3)
    assert summary.ttft_s[95] == pytest.approx(0.88)
    # TPOT of four requests sorted 0.05, 0.1, 0.1, 0.2: p50 0.1, p95 at position 2.85 -> 0.1 + 0.85 x 0.1
    assert summary.tpot_s[50] == pytest.approx(0.1)
    assert summary.tpot_s[95] == pytest.approx(0.185)
    # e2e sorted 0.25, 0.3, 0.5, 0.9, 1.0: p50 0.5, p95 at 3.8 -> 0.9 + 0.8 x 0.1
    assert summary.e2e_s[50] == pytest.approx(0.5)
    assert summary.e2e_s[95] == pytest.approx(0.98)
    # 3 + 2 + 4 + 2 + 1 = 12 tokens from the first send (0.0) to the last token (4.0); 3 requests had TTFT <= 0.35 s
    assert summary.reply_tokens == 12 and summary.duration_s == pytest.approx(4.0)
    assert summary.throughput_tokens_per_s == pytest.approx(12 / 4.0)
    assert summary.good_requests == 3 and summary.goodput_requests_per_s == pytest.approx(3 / 4.0)


def test_incomplete_or_failed_requests_never_count_as_good():
    """A request cut short or with an error misses the SLO however fast its first token came."""
    short = _record(0, 0.0, [0.01, 0.02], asked=5)
    failed = RequestRecord(index=1, sent_s=0.0, token_times_s=(0.01,), asked_tokens=1, error="refused")
    summary = summarize([short, failed], SLO(ttft_s=1.0))
    assert summary.completed == 0 and summary.good_requests == 0


def test_waiting_time_is_ttft_minus_the_engines_prefill():
    """With the engine's prefill time known, the Gantt splits TTFT into waiting and prefill."""
    record = RequestRecord(index=0, sent_s=1.0, token_times_s=(1.5, 1.6), asked_tokens=2, server_prompt_ms=200.0)
    assert record.waiting_s == pytest.approx(0.3)
    row = request_table([record]).iloc[0]
    assert row.prefill_start_s == pytest.approx(1.3) and row.ttft_ms == pytest.approx(500)


def test_percentile_of_nothing_is_nan():
    """No values (e.g. every request failed): NaN, not an exception."""
    assert np.isnan(percentile([None, None], 95))


def test_knee_is_the_first_rate_whose_p95_doubles():
    """p95 0.5, 0.6, 1.1, 3.0 s at rates 1, 2, 4, 8: the knee is rate 4 (more than twice 0.5 s)."""
    assert knee_index([1, 2, 4, 8], [0.5, 0.6, 1.1, 3.0]) == 2
    assert knee_index([4, 1, 2], [0.9, 0.5, 0.6]) is None


def test_gantt_bars_add_up_to_each_requests_measured_ttft_and_end_to_end():
    """Waiting + prefill bars span the TTFT, and the three bars together the end-to-end time, per request."""
    from inference.lessons.serving.figures import gantt_figure

    records = [
        RequestRecord(index=0, sent_s=0.0, token_times_s=(0.5, 0.6, 0.9), asked_tokens=3, server_prompt_ms=200),
        RequestRecord(index=1, sent_s=0.2, token_times_s=(0.4, 0.5), asked_tokens=2, server_prompt_ms=150),
    ]
    fig = gantt_figure(request_table(records), "test")
    waiting, prefill, decode = (np.asarray(trace.x, dtype=float) for trace in fig.data[:3])
    assert waiting + prefill == pytest.approx([500, 200])
    assert waiting + prefill + decode == pytest.approx([900, 300])
    assert np.asarray(fig.data[0].base, dtype=float) == pytest.approx([0, 200])  # each row starts when it was sent


def test_traffic_figure_has_a_bar_per_request_at_its_arrival():
    """The traffic chart shows every request of the trace at its arrival time with its prompt and reply lengths."""
    from inference.lessons.serving.figures import traffic_figure

    trace = poisson_trace("short chat", 3.0, 7, seed=2, vocab_size=4096)
    fig = traffic_figure(trace)
    assert list(fig.data[0].x) == [r.arrival_s for r in trace.requests]
    assert list(fig.data[0].y) == [r.prompt_tokens for r in trace.requests]
    assert list(fig.data[1].y) == [r.reply_tokens for r in trace.requests]


def _summary(tokens_per_s: float) -> RunSummary:
    return RunSummary(16, 16, 1000, 10.0, tokens_per_s, {50: 0.02, 95: 0.1}, {}, {}, SLO(), 16)


def test_asked_rate_is_the_reply_tokens_before_the_last_arrival_over_the_arrival_span():
    """n requests make n - 1 gaps: the tokens of the first n - 1 requests over the time from the first to the last
    arrival (not λ x the mean reply, which these draws stray from); NaN without a window."""
    trace = poisson_trace("short chat", 2.0, 16, 0, 4096)
    by_hand = sum(r.reply_tokens for r in trace.requests[:15]) / trace.requests[15].arrival_s
    assert trace.asked_tokens_per_s() == pytest.approx(by_hand)
    assert np.isnan(poisson_trace("short chat", 2.0, 1, 0, 4096).asked_tokens_per_s())


def test_the_traffic_chart_and_the_verdict_quote_the_same_asked_rate():
    """One definition, computed once: the chart's subtitle and the 1-vs-N verdict give the same tokens/s."""
    from inference.lessons.serving.experiments import comparison_verdict
    from inference.lessons.serving.figures import traffic_figure

    trace = poisson_trace("short chat", 2.0, 16, 0, 4096)
    asked = f"{trace.asked_tokens_per_s():,.0f}"
    verdict = comparison_verdict(_summary(50), _summary(50), 8, trace, 23_000_000, None, 50.0)
    assert f"asking for {asked} reply tokens/s" in traffic_figure(trace).layout.title.text
    assert f"asks for {asked} tokens/s" in verdict


def _served_at_once(trace, gap_s: float = 1e-6) -> list[RequestRecord]:
    """Each request answered the moment it arrives, its tokens `gap_s` apart: a server that always keeps up."""
    return [
        RequestRecord(
            r.index,
            r.arrival_s,
            tuple(r.arrival_s + gap_s * (k + 1) for k in range(r.reply_tokens)),
            asked_tokens=r.reply_tokens,
        )
        for r in trace.requests
    ]


def test_a_server_that_keeps_up_streams_what_was_asked_over_the_same_window():
    """At 0.5 requests/s a server that answers at once streams exactly what the trace asked during its arrivals:
    the sweep's asked line cannot stand above the measured one; one that delivers half as fast falls below it."""
    from inference.lessons.serving.stats import streamed_tokens_per_s

    trace = poisson_trace("short chat", 0.5, 12, 0, 4096)
    kept_up = streamed_tokens_per_s(_served_at_once(trace), trace.duration_s)
    assert kept_up == pytest.approx(trace.asked_tokens_per_s())
    slow = [  # one slot, every token 0.2 s: the queue outgrows the window
        RequestRecord(0, 0.0, tuple(0.2 * (k + 1) for k in range(sum(r.reply_tokens for r in trace.requests))))
    ]
    assert streamed_tokens_per_s(slow, trace.duration_s) < 0.5 * trace.asked_tokens_per_s()
    assert np.isnan(streamed_tokens_per_s(slow, 0.0))


def test_comparison_verdict_says_nothing_was_gained_when_one_slot_kept_up():
    """One slot that streamed what the trace asked over its arrivals kept up: batching had nothing to gain, raise λ;
    one that streamed less fell behind and requests queued. Each figure in the sentence is the run's own."""
    from inference.lessons.serving.experiments import comparison_verdict

    trace = poisson_trace("short chat", 2.0, 16, 0, 4096)
    asked = trace.asked_tokens_per_s()
    kept_up = comparison_verdict(_summary(asked * 0.9), _summary(asked), 8, trace, 23_000_000, 300 * 2**20, asked)
    assert "nothing to gain" in kept_up and "Raise the arrival rate" in kept_up
    assert f"{asked:,.0f} tokens/s" in kept_up and "(100%)" in kept_up
    fell_behind = comparison_verdict(
        _summary(asked * 0.3), _summary(asked * 0.6), 8, trace, 23_000_000, None, asked * 0.3
    )
    assert "fell behind" in fell_behind and "requests queue" in fell_behind and "(**2.0×**)" in fell_behind
    assert "(30%)" in fell_behind


def test_time_per_token_labels_keep_their_digits():
    """0.65 ms reads 0.65, not 1; larger values round as their size allows; seconds from 1,000 ms."""
    from inference.lessons.serving.figures import comparison_figure, ms_label

    assert [ms_label(v) for v in (0.65, 3.14159, 12.34, 345.6, 1500.0)] == ["0.65", "3.14", "12.3", "346", "1.5 s"]
    summary = RunSummary(4, 4, 40, 1.0, 40.0, {50: 0.02, 95: 0.03}, {50: 0.00065, 95: 0.0012}, {}, SLO(), 4)
    fig = comparison_figure({"one": summary})
    assert ["0.65", "1.2"] in [list(trace.text) for trace in fig.data]


def test_sweep_caption_counts_one_replay_per_rate():
    """The caption's counts agree with each other: one replay at each rate, rates x requests in all."""
    from inference.lessons.serving.text import sweep_caption

    text = sweep_caption(5, 12, 8, 4.0)
    assert "One replay of 12 requests at each of the 5 rates (60 requests in all" in text
    assert "runs" not in text and "knee is at λ = 4/s" in text


def test_sweep_figure_plots_asked_and_streamed_over_the_same_window():
    from inference.lessons.serving.figures import sweep_figure

    table = pd.DataFrame(
        {
            "rate_per_s": [0.5, 2.0, 8.0],
            "asked_tokens_per_s": [25.0, 100.0, 400.0],
            "streamed_tokens_per_s": [25.0, 99.0, 210.0],
            "throughput_tokens_per_s": [24.0, 95.0, 205.0],
            "ttft_p95_ms": [20.0, 25.0, 900.0],
            "e2e_p95_ms": [80.0, 90.0, 2000.0],
        }
    )
    fig = sweep_figure(table, 2)
    lines = {trace.name: list(trace.y) for trace in fig.data}
    assert lines["asked during the arrivals"] == [25.0, 100.0, 400.0]
    assert lines["streamed in the same window"] == [25.0, 99.0, 210.0]


def test_cost_caption_prices_from_capacity():
    from inference.lessons.serving.text import cost_caption

    text = cost_caption(1.0, 480.0, 620.0, 8)
    assert "Priced at capacity" in text and "480 tokens/s with 1 slot and 620 with 8" in text


def test_comparison_verdict_explains_by_whether_the_weights_fit_the_last_level_cache():
    """Weights within the last-level cache: the shared read is cheap; beyond it: the read from memory dominates."""
    from inference.lessons.serving.experiments import comparison_verdict

    trace = poisson_trace("short chat", 64.0, 16, 0, 4096)
    cache = 300 * 2**20
    small = comparison_verdict(_summary(100), _summary(150), 8, trace, 23_000_000, cache, 100.0)
    large = comparison_verdict(_summary(10), _summary(40), 8, trace, 434_000_000, cache, 10.0)
    assert "fit in this CPU's 300 MiB last-level cache" in small and "23 MB" in small
    assert "434 MB of weights from memory" in large and "last-level cache" not in large


def test_half_width_charts_keep_their_titles_short_and_the_sweep_stacks_its_panels():
    """At 800 px a half-width chart holds about 22 characters of title: the comparison's panel titles come in short
    lines, and the sweep's two panels stand one above the other (side by side, an axis title sat on the other)."""
    from inference.lessons.serving.figures import comparison_figure, sweep_figure

    summary = RunSummary(4, 4, 40, 1.0, 40.0, {50: 0.02, 95: 0.03}, {50: 0.001, 95: 0.002}, {}, SLO(), 4)
    titles = [a.text for a in comparison_figure({"one": summary}).layout.annotations]
    assert len(titles) == 4 and all(len(line) <= 22 for t in titles for line in t.split("<br>"))
    table = pd.DataFrame(
        {
            "rate_per_s": [1.0, 4.0],
            "asked_tokens_per_s": [50.0, 200.0],
            "streamed_tokens_per_s": [50.0, 120.0],
            "throughput_tokens_per_s": [49.0, 118.0],
            "ttft_p95_ms": [20.0, 400.0],
            "e2e_p95_ms": [80.0, 900.0],
        }
    )
    layout = sweep_figure(table, None).layout
    assert layout.yaxis.domain[0] > layout.yaxis2.domain[1]  # throughput above latency, each full width
    assert layout.xaxis.domain == layout.xaxis2.domain


def test_the_comparison_charts_text_gives_every_runs_four_panels():
    """Both runs' throughput, goodput and p50 / p95 times, each under its own name (the generic text cut the second
    run off as "4 more series")."""
    from inference.lessons.serving.text import comparison_sentence

    one = RunSummary(16, 16, 1000, 20.0, 32.6, {50: 12.154, 95: 24.202}, {50: 0.0294, 95: 0.0308}, {}, SLO(), 1)
    eight = RunSummary(16, 16, 1000, 10.0, 93.0, {50: 4.41, 95: 5.84}, {50: 0.0659, 95: 0.0788}, {}, SLO(), 8)
    said = comparison_sentence({"1 slot": one, "8 slots": eight})
    assert said == (
        "Each run, p50 / p95 for the times: 1 slot: 32.6 tokens/s, 0.05 good requests/s (TTFT ≤ 1000 ms), time to "
        "first token 12,154 / 24,202 ms, time per token 29.4 / 30.8 ms; 8 slots: 93.0 tokens/s, 0.8 good requests/s "
        "(TTFT ≤ 1000 ms), time to first token 4,410 / 5,840 ms, time per token 65.9 / 78.8 ms."
    )
