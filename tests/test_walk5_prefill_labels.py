"""#46 item 5 on Prefill vs decode: the single run is the middle of its runs (not the fastest), its labels say what
was timed, and when its prefill rate still tops the sweep's best the page says why the two differ."""

import pandas as pd
import pytest

from inference.lessons.prefill_decode import text as pd_text
from inference.lessons.prefill_decode.timing import GenerationTiming, middle_run

pytestmark = pytest.mark.unit


def timing(prefill_ms: float, prompt_tokens: int = 30, runs=(40.0, 41.0, 39.0)) -> GenerationTiming:
    steps = pd.DataFrame(
        {
            "phase": ["prefill", "decode", "decode"],
            "forward_ms": [prefill_ms, 1.0, 1.2],
            "step_ms": [prefill_ms, 1.1, 1.3],
        }
    )
    return GenerationTiming(steps=steps, prompt_tokens=prompt_tokens, stop_reason=None, run_totals_ms=runs)


def test_the_run_shown_is_the_middle_one_not_the_fastest():
    assert middle_run([40.0, 90.0, 30.0]) == 0
    assert middle_run([5.0]) == 0
    assert middle_run([7.0, 5.0]) == 1  # two runs: the faster, said so by the label


def test_the_run_labels_say_what_was_timed_and_how():
    label = pd_text.run_how(timing(10.0))
    assert label == "the middle of 3 identical greedy runs after a warm-up"
    assert pd_text.run_how(timing(10.0, runs=(40.0, 41.0))) == "the faster of 2 identical greedy runs after a warm-up"
    assert "2 decode steps" in pd_text.tpot_help(timing(10.0))  # a mean over this generation's steps


def test_a_run_faster_than_the_sweeps_best_is_explained_with_both_numbers():
    run = timing(prefill_ms=7.5, prompt_tokens=30)  # 4,000 tokens/s
    said = pd_text.run_vs_sweep(run, best_prefill_tokens_per_s=3745.0, repeats=5)
    assert "4,000" in said and "3,745" in said and "median of 5" in said
    assert pd_text.run_vs_sweep(timing(prefill_ms=10.0), best_prefill_tokens_per_s=3745.0, repeats=5) is None


def test_the_cost_pages_output_token_says_which_decode_step_it_is():
    from inference.lessons.cost import text as cost_text
    from inference.lessons.cost.experiments import AnswerCost

    answer = AnswerCost(prompt_tokens=256, reply_tokens=128, prefill_ms=20.0, decode_ms=127.0)
    said = cost_text.output_token_help(answer)
    assert "127 decode passes" in said and "128-token reply" in said and "256-token prompt" in said
    assert "one run" in said


def test_the_kv_pages_with_cache_step_says_what_it_is_timed_beside():
    from inference.lessons.kv_cache import text as kv_text

    said = kv_text.trend("m", 10.4, 12.0, 30.0, 200, lean_step_ms=1.32)
    assert "10.4 ms" in said and "1.32 ms" in said and "interleaved" in said
    assert "1.32" not in kv_text.trend("m", 10.4, 12.0, 30.0, 200)


def test_the_timeline_text_gives_the_prefill_and_the_decode_passes_numbers():
    steps = pd.DataFrame(
        {
            "phase": ["prefill", "decode", "decode", "decode"],
            "start_ms": [0.0, 135.0, 190.0, 250.0],
            "forward_ms": [130.0, 50.0, 55.0, 52.0],
            "step_ms": [135.0, 55.0, 60.0, 54.0],
        }
    )
    run = GenerationTiming(steps=steps, prompt_tokens=41, stop_reason=None, run_totals_ms=(304.0,))
    said = pd_text.timeline_sentence(run)
    assert said == (
        "Prefill: 41 prompt tokens in one pass, first token at 135 ms; decode: 3 passes of one token, "
        "55.0 ms each (median), the last ending at 304 ms."
    )
    alone = GenerationTiming(steps=steps.iloc[:1], prompt_tokens=41, stop_reason="eos", run_totals_ms=(135.0,))
    assert pd_text.timeline_sentence(alone).endswith("first token at 135 ms; no decode pass followed.")
