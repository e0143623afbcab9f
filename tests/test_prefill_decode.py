"""Prefill vs decode: the structure of what is measured (never the timings themselves), and the page."""

import json
import os
from statistics import median

import pandas as pd
import pytest
import torch

from inference.lessons.prefill_decode import text as pd_text
from inference.lessons.prefill_decode import timing as timing_module
from inference.lessons.prefill_decode.timing import (
    GenerationTiming,
    Sweep,
    crossover_prompt_tokens,
    default_prompt_lengths,
    findings,
    measure_sweep,
    summarise_runs,
    time_generation,
)
from tests.conftest import open_app_page

pytestmark = pytest.mark.page

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

torch.set_num_threads(1)  # a training job may share the machine


def test_sweep_returns_medians_of_three_runs_rates_and_progress_and_refuses_what_it_cannot_measure(gpt2):
    """One summary row per requested length, each the median (with quartiles, min and max) of 3 runs, the warm-up
    not among them; each run's prefill tokens/s = P / prefill seconds; progress counts every run to done; fewer
    than three runs or a prompt beyond the context (128) refused."""
    calls = []
    sweep = measure_sweep(gpt2[0], [4, 8], repeats=3, decode_tokens=2, progress=lambda *a: calls.append(a))
    assert sweep.summary["prompt_tokens"].tolist() == [4, 8]
    for row in sweep.summary.itertuples():
        runs = sweep.runs[sweep.runs.prompt_tokens == row.prompt_tokens]
        assert sorted(runs["run"]) == [1, 2, 3]
        for measure in ("prefill_ms", "prefill_tokens_per_s", "decode_ms_per_token"):
            assert getattr(row, measure) == pytest.approx(median(runs[measure]))
            spread = [getattr(row, measure + (f"_{end}" if end else "")) for end in ("min", "q1", "", "q3", "max")]
            assert spread == sorted(spread)
    runs = sweep.runs
    assert runs.prefill_tokens_per_s.tolist() == pytest.approx((runs.prompt_tokens / runs.prefill_ms * 1000).tolist())
    assert {total for _, total, _ in calls} == {2 * (3 + 1)} and calls[0][2].startswith("warm-up")
    assert calls[-1][:2] == (8, 8)
    with pytest.raises(ValueError, match="repeats"):
        measure_sweep(gpt2[0], [4], repeats=2)
    with pytest.raises(ValueError, match="prompt_lengths"):
        measure_sweep(gpt2[0], [127], repeats=3, decode_tokens=2)


def test_default_prompt_lengths_run_from_8_and_leave_room_to_decode():
    assert default_prompt_lengths(512) == [8, 16, 32, 64, 128, 256, 448]
    for context in (128, 1024, 131072):
        lengths = default_prompt_lengths(context)
        assert lengths[0] == 8 and lengths == sorted(lengths) and lengths[-1] <= context - 16


def test_generation_timing_lays_the_middle_runs_steps_end_to_end(bundled, monkeypatch):
    """One prefill, then one-token decode steps laid end to end; the timeline is the median of three runs (the
    fastest once read a prefill rate above the sweep's best); a slow model stops once the time budget is spent."""
    ids = bundled.tokenizer("Once upon a time, there was a cat.")["input_ids"]
    timing = time_generation(bundled.model, bundled.tokenizer, ids, 6)
    steps = timing.steps
    assert steps["phase"].iloc[0] == "prefill" and steps["tokens_in_forward"].iloc[0] == len(ids)
    assert (steps["phase"].iloc[1:] == "decode").all() and (steps["tokens_in_forward"].iloc[1:] == 1).all()
    ends = (steps["start_ms"] + steps["step_ms"]).iloc[:-1].tolist()
    assert steps["start_ms"].iloc[1:].tolist() == pytest.approx(ends)
    assert timing.runs == 3 and steps["step_ms"].sum() == pytest.approx(sorted(timing.run_totals_ms)[1])
    monkeypatch.setattr(timing_module, "TIMING_BUDGET_S", 0.0)
    assert time_generation(bundled.model, bundled.tokenizer, ids, 6).runs == 1


def test_a_run_faster_than_the_sweeps_best_is_explained_only_then():
    steps = pd.DataFrame({"phase": ["prefill", "decode"], "forward_ms": [7.5, 1.0], "step_ms": [7.5, 1.1]})
    run = GenerationTiming(steps=steps, prompt_tokens=30, stop_reason=None, run_totals_ms=(40.0, 41.0, 39.0))
    said = pd_text.run_vs_sweep(run, best_prefill_tokens_per_s=3745.0, repeats=5)  # the run read 4,000 tokens/s
    assert "4,000" in said and "3,745" in said
    assert pd_text.run_vs_sweep(run, best_prefill_tokens_per_s=4001.0, repeats=5) is None


def sweep_of(medians: dict[int, tuple[float, float]]) -> Sweep:
    """A made-up sweep: three identical runs per prompt length of (prefill ms, decode ms per token)."""
    runs = pd.DataFrame(
        [
            {
                "prompt_tokens": n,
                "run": r,
                "prefill_ms": p,
                "prefill_tokens_per_s": n / p * 1000,
                "decode_ms_per_token": d,
            }
            for n, (p, d) in medians.items()
            for r in (1, 2, 3)
        ]
    )
    return Sweep(runs=runs, summary=summarise_runs(runs), repeats=3, decode_tokens=2)


def test_findings_quote_the_sweep():
    """Saturation, crossover and free-ride lengths read off a made-up sweep."""
    medians = {8: (4.0, 2.0), 16: (5.0, 2.0), 32: (8.0, 2.1), 64: (16.0, 2.0), 128: (30.0, 2.2)}
    found = findings(sweep_of(medians), PerTokenFlops())
    assert found.best_prefill_tokens_per_s == pytest.approx(128 / 30 * 1000)
    assert found.saturation_tokens == 32  # 4,000 tokens/s >= 80% of 4,267
    assert found.decode_ms_per_token == pytest.approx(2.0)
    assert found.longest_prefill_ms / found.decode_ms_per_token == pytest.approx(15.0)
    assert found.free_ride_tokens == 8  # 4 ms <= 2 decode steps; 16 tokens took 5 ms
    assert found.decode_gflops == pytest.approx(2e6 * 500 / 1e9)
    assert found.prefill_flops_prompt == 128 and found.prefill_gflops == pytest.approx(2e6 * 128 / 0.030 / 1e9)


class PerTokenFlops:
    """2 x one million FLOPs per token, nothing else: a made-up model for made-up sweeps."""

    def prefill(self, tokens):
        return 2_000_000 * tokens

    def decode(self, context):
        return 2_000_000


def test_crossover_prompt_is_read_off_the_sweep_and_past_the_context_said_to_be_none():
    """Prefill 4, 5, 8, 16, 30 ms at 8..128 tokens, decode 2 ms: a 5-token reply (10 ms) matches a 40-token prompt;
    a 40-token reply (80 ms) lies past 128 tokens, on the line through the last two points (14 ms per 64 tokens),
    which for a 256-token context is no prompt the model can read."""
    medians = {8: (4.0, 2.0), 16: (5.0, 2.0), 32: (8.0, 2.0), 64: (16.0, 2.0), 128: (30.0, 2.0)}
    sweep = sweep_of(medians)
    five = crossover_prompt_tokens(sweep, 5)
    assert (five.reply_ms, five.prompt_tokens, five.how) == (10.0, 32 + 2 / 8 * 32, "interpolated")
    forty = crossover_prompt_tokens(sweep, 40)
    assert forty.how == "extrapolated" and forty.prompt_tokens == pytest.approx(128 + 50 / 14 * 64)
    assert crossover_prompt_tokens(sweep, 1).how == "below"
    assert forty.beyond(256) and not forty.beyond(512)
    assert "no prompt this model can read" in pd_text.measured_findings(sweep, findings(sweep), forty, 256)


def test_the_flops_sentence_names_the_thread_count_of_its_peak():
    from types import SimpleNamespace

    from inference.lessons.prefill_decode.text import flops_findings

    medians = {8: (4.0, 2.0), 16: (5.0, 2.0), 32: (8.0, 2.0)}
    found = findings(sweep_of(medians), PerTokenFlops())
    count = SimpleNamespace(matmul_weights=1_000_000, output_weights=0)
    peak = SimpleNamespace(value=117.8e9, how="fastest of 5 products, on 1 torch thread")
    info = SimpleNamespace(heads=8, head_dim=32, weight_bytes=23_000_000)
    one = flops_findings(found, count, info, peak, 1, "", 2)
    assert "117.8 GFLOP/s this CPU reached **on 1 thread**" in one and "all 2 CPU threads" in one
    assert "all 2 CPU threads" not in flops_findings(found, count, info, peak, 2, "", 2)


def test_prefill_decode_page_runs_and_its_sweep_button_draws_both_charts():
    at = open_app_page("app_pages/prefill-decode.py", timeout=120, home_first=True)
    at.slider(key="pd_new_tokens").set_value(8).run()
    at.slider(key="pd_repeats").set_value(3).run()
    at.button(key="pd_sweep").click().run()
    assert not at.exception
    titles = [json.loads(chart.proto.spec)["layout"]["title"]["text"] for chart in at.get("plotly_chart")]
    assert titles == ["One generation, pass by pass", "Time of one forward pass", "Tokens per second"]


def test_the_saturation_line_is_named_in_the_legend_not_written_over_the_curve():
    from inference.lessons.prefill_decode.figures import sweep_rate_figure

    medians = {8: (4.0, 2.0), 16: (5.0, 2.0), 32: (8.0, 2.0), 64: (16.0, 2.0), 128: (30.0, 2.0)}
    fig = sweep_rate_figure(sweep_of(medians), 32)
    assert "80% of best, P = 32" in [trace.name for trace in fig.data]
    assert not fig.layout.annotations
