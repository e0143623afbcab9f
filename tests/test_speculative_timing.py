"""Speculation against plain decoding: the plain-decoding timer, the formula, the words the verdict takes from the
measurements, the sweep, the verify pass's cost, the bench's threads, and the text the page draws."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from app_pages.shared.stepper import Stepper
from inference.bench import real_spec
from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.routing import BUNDLED_MOE_DIR, BUNDLED_MOE_NAME
from inference.core.run import GREEDY, new_trace
from inference.lessons.speculative import comparison, drafters, drafting, figures, text
from inference.lessons.speculative.comparison import Comparison, PlainTiming, plain_decode, summarise
from inference.lessons.speculative.run import DraftCheck, RoundRecord
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("settings", [GREEDY, SamplingSettings(temperature=0.9, top_k=40, top_p=0.9, min_p=0.05,
                                                               repetition_penalty=1.2)], ids=["greedy", "filters"])  # fmt: skip
def test_plain_decoding_writes_the_apps_trace_tokens(bundled, settings):
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    trace = new_trace(bundled.model, bundled.tokenizer, prompt, 30, seed=3, stop_at_eos=False)
    list(trace.run(settings))
    assert plain_decode(bundled.model, prompt, 30, settings, seed=3) == trace.generated_ids


def test_the_plain_timer_times_each_token_once_and_starts_over_after_back(bundled, monkeypatch):
    """Timing a round at a time feeds what timing at once feeds; a text that is not a continuation starts over."""
    drawn, real = [], comparison.choose_token
    monkeypatch.setattr(comparison, "choose_token", lambda logits, *a: drawn.append(logits.clone()) or real(logits, *a))
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    tokens = encode_prompt(bundled.tokenizer, " there was a little girl who liked")
    settings = SamplingSettings(temperature=0.8)
    comparison.PlainTimer(bundled.model, prompt, settings).extend(tokens)
    at_once, drawn[:] = list(drawn), []
    timer = comparison.PlainTimer(bundled.model, prompt, settings)
    first, second = timer.extend(tokens[:3]), timer.extend(tokens)
    assert len(drawn) == len(tokens) == len(second.step_ms) and second.forward_ms[:3] == first.forward_ms
    assert all(torch.equal(a, b) for a, b in zip(at_once, drawn, strict=True))
    assert len(timer.extend(tokens[:2] + [tokens[0]]).step_ms) == 3 and len(drawn) == len(tokens) + 3


def test_the_formula_is_the_geometric_sum_over_the_rounds_cost():
    assert comparison.expected_tokens_per_pass(0.5, 4) == pytest.approx(1.9375)
    assert comparison.expected_tokens_per_pass(1.0, 4) == 5 and comparison.expected_tokens_per_pass(0.0, 4) == 1
    assert comparison.predicted_speedup(0.8, 4, 0.1) == pytest.approx(comparison.expected_tokens_per_pass(0.8, 4) / 1.4)
    assert comparison.predicted_speedup(comparison.break_even_alpha(4, 0.3), 4, 0.3) == pytest.approx(1.0, abs=1e-9)
    assert comparison.break_even_alpha(4, 1.5) is None  # 5 tokens at best for the cost of 7 passes


def record(index, round_ms, verify_ms=10.0):
    checks = [DraftCheck(i, 1, "a", 1.0, 1.0, None, None, 1.0, None, "accepted") for i in range(2)]
    return RoundRecord(index, drafters.DRAFT_MODEL, 2, 5, checks, 1, 1, "a", "bonus", [], [1, 1], [2.0, 2.0], verify_ms,
                       round_ms)  # fmt: skip


@pytest.mark.parametrize(("round_ms", "words"), [([10.0] * 3, "2.0x faster"), ([12.0, 40.0] * 2, "within this machine's noise"),
                                                 ([40.0] * 3, "2.0x slower")])  # fmt: skip
def test_the_verdicts_comparison_words_come_from_the_rounds_speedups(round_ms, words):
    """The words say faster or slower only where the rounds' middle half is clear of 1; the metric and the verdict
    quote the same measured speed-up; round 0's verify pass (with the prompt) is left out once a second ran."""
    rounds = tuple(record(i, ms, verify_ms=10.0 + i) for i, ms in enumerate(round_ms))
    plain = PlainTiming([10.0] * (2 * len(rounds)), [10.0] * (2 * len(rounds)))
    result = Comparison(summarise(list(rounds)), plain, 2, rounds)
    said = text.run_verdict(result, 1_000)
    assert words in said and f"{result.measured_speedup:.2f}×" in said and text.run_metrics(result)[2][1] in said
    assert result.verify_against_one().ratio == pytest.approx(result.verify_cost)
    assert summarise(list(rounds[:1])).verify_read_prompt and not summarise(list(rounds)).verify_read_prompt
    assert summarise(list(rounds[:2])).verify_pass_ms == 11.0


def test_the_sweep_runs_on_every_side_with_one_progress_bar(bundled, monkeypatch):
    moe, seen, progress = load_model(str(BUNDLED_MOE_DIR)), [], []

    def fake_sweep(target, tokenizer, make_drafter, prompt_ids, step):
        seen.append(target)
        for done in range(3):
            step(done, 2, f"run {done}")
        return pd.DataFrame({"gamma": [1, 2], "measured_speedup": [0.9, 1.1]})

    monkeypatch.setattr(comparison, "sweep", fake_sweep)
    sides = [(BUNDLED_MODEL_NAME, bundled.model, bundled.tokenizer), (BUNDLED_MOE_NAME, moe.model, moe.tokenizer)]
    table = comparison.sweep_sides(sides, lambda: None, [1, 2, 3], lambda *a: progress.append(a))
    assert seen == [bundled.model, moe.model]
    assert table["target"].tolist() == [BUNDLED_MODEL_NAME] * 2 + [BUNDLED_MOE_NAME] * 2
    assert table["weight_bytes"].iloc[0] == bundled.model.num_parameters() * 4 < table["weight_bytes"].iloc[2]
    done = [p[0] for p in progress]
    assert done == sorted(done) and {p[1] for p in progress} == {4} and progress[-1][2].startswith(BUNDLED_MOE_NAME)
    assert drafting.other_side(BUNDLED_MODEL_NAME) == (BUNDLED_MOE_NAME, str(BUNDLED_MOE_DIR))
    assert drafting.other_side(BUNDLED_MOE_NAME) == (BUNDLED_MODEL_NAME, "")


def test_a_verify_cost_is_two_timings_of_one_cache_compared_pass_by_pass(bundled):
    cost = comparison.measure_verify_cost(bundled.model, "storyteller", positions=5, repeats=3)
    assert cost.one.repeats == cost.many.repeats == 3 and cost.cost == cost.many.median_ms / cost.one.median_ms
    said = text.why_they_differ(cost, cost, cache=10**9)
    assert "within this machine's noise" in said and "fit in it" in said


def test_the_bench_measures_on_the_apps_threads_and_gives_the_process_its_own_back():
    before = torch.get_num_threads()
    assert real_spec.on_threads(None, torch.get_num_threads) == (Limits.from_env().torch_threads,) * 2
    with pytest.raises(ZeroDivisionError):
        real_spec.on_threads(1, lambda: 1 / 0)
    assert torch.get_num_threads() == before


def test_the_text_shows_the_prompts_last_tokens_and_counts_those_it_leaves_out(bundled):
    ids = bundled.tokenizer.encode("Once upon a time there was a little cat.")
    shown = figures.text_html(bundled.tokenizer, ids, [], prompt_tail=4)
    assert f"… {len(ids) - 4} earlier prompt tokens" in shown and shown.count("prompt token ") == 4
    assert "earlier prompt" not in figures.text_html(bundled.tokenizer, ids, [])


def test_only_a_sessions_first_empty_run_opens_with_a_round():  # the Stepper this page opens with
    stepper, state, empty = Stepper("spec", "spec_run", lambda run: len(run.rounds)), {}, SimpleNamespace(rounds=[])
    assert stepper.opens_with_a_step(empty, state) and state["spec_opened"]
    assert not stepper.opens_with_a_step(SimpleNamespace(rounds=[]), state)  # Reset: starts empty
    assert not stepper.opens_with_a_step(empty, {"spec_steps_in_url": 3})  # a link replays its 3
