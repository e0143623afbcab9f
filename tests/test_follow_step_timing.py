"""#46 item 5: the decode step Cost, KV cache and Speculative quote is a `measuring.Timing` (its median, with the
middle half and a label saying what was timed), so it reads like Inside one pass's and says where it differs."""

import statistics

import pytest
import torch

from inference.core.measuring import Timing, pass_timing
from inference.core.run import run_greedy
from inference.lessons.cost import text as cost_text
from inference.lessons.cost.experiments import measure_answer
from inference.lessons.kv_cache import text as kv_text
from inference.lessons.kv_cache.experiments import compare_cache, engine_decode_step, with_cache_step

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # other jobs share the machine


def test_pass_timing_keeps_every_pass_and_needs_two():
    timing = pass_timing([3.0, 1.0, 2.0, 9.0], "four passes")
    assert isinstance(timing, Timing) and timing.median_ms == 2.5 and timing.times_ms == (3.0, 1.0, 2.0, 9.0)
    assert timing.label().startswith("four passes: 2.50 ms (middle half ")
    with pytest.raises(ValueError, match="2 timed passes"):
        pass_timing([1.0], "one")


def test_the_cost_pages_output_token_is_the_median_of_its_decode_passes(bundled):
    answer = measure_answer(bundled.model, bundled.tokenizer, prompt_tokens=16, reply_tokens=9)
    step = answer.decode_step
    assert isinstance(step, Timing) and step.repeats == 8
    assert answer.ms_per_output_token == step.median_ms == statistics.median(answer.step_ms)
    assert sum(answer.step_ms) == pytest.approx(answer.decode_ms)
    assert "at 17–24 tokens of context" in step.what
    said = cost_text.output_token_help(answer)
    assert step.label() in said and "median of the 8 decode passes" in said


def test_the_kv_pages_step_figures_are_timings_that_say_what_they_timed(bundled):
    trace = run_greedy(bundled.model, bundled.tokenizer, [1, 2, 3, 4, 5], 6, stop_at_eos=False)
    engine = engine_decode_step(trace)
    decode = [r.forward_ms for r in trace.records if r.phase == "decode"]
    assert engine.median_ms == statistics.median(decode) and engine.repeats == len(decode)
    assert "section 1's run" in engine.what
    steps = compare_cache(bundled.model, [1, 2, 3, 4, 5], 6).steps
    cached = with_cache_step(steps)
    assert cached.median_ms == statistics.median(steps.with_cache_ms.iloc[1:]) and "no-cache" in cached.what
    caption = kv_text.step_time_caption(engine, cached)
    assert engine.label() in caption and cached.label() in caption


def test_passes_of_one_run_say_no_warm_ups():
    assert pass_timing([1.0, 2.0, 3.0], "x").how == "median of 3"
    assert pass_timing([1.0, 2.0, 3.0], "x", warmups=1).how == "median of 3 after 1 warm-up"
