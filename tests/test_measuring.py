"""The one measuring module: fixed filler prompts, timed passes that compute what the model computes, a greedy run
that equals `model.generate`; one way to time what a page quotes (`Timing`: warm-ups not kept, the median and the
middle half, a label saying what was timed); one way to compare two measurements (`compare`)."""

import pytest
import torch

from inference.core.kv_cache import new_cache
from inference.core.measuring import (
    Timing,
    compare,
    filler_batch,
    filler_prompt,
    pass_timing,
    repeat_timing,
    time_decode_step,
    timed_decode,
    timed_pass,
)
from inference.core.run import GREEDY, run_greedy
from tests.conftest import transformers_greedy

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # other jobs may share the machine


def test_filler_prompts_are_fixed_in_range_and_leave_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    assert filler_prompt(4096, 32) == filler_prompt(4096, 32)
    assert filler_prompt(4096, 32) != filler_prompt(4096, 32, seed=7)
    assert filler_prompt(4096, 32) == filler_batch(4096, 3, 32)[0].tolist()  # one maker: a prompt is row 0
    batch = filler_batch(50, 4, 16, seed=1)
    assert batch.shape == (4, 16) and int(batch.min()) >= 0 and int(batch.max()) < 50
    assert torch.equal(torch.get_rng_state(), before)


def test_timed_passes_compute_the_models_own_logits(bundled):
    """A timed prefill plus timed decode steps ends on the logits of one untimed pass over the whole sequence."""
    model = bundled.model
    prompt = torch.tensor([filler_prompt(model.config.vocab_size, 12)])
    cache = new_cache(model.config)
    logits, prefill_ms = timed_pass(model, prompt, cache)
    step_cache = new_cache(model.config)
    start, _ = timed_pass(model, prompt, step_cache)
    last, times = timed_decode(model, start, step_cache, 3)
    assert len(times) == 3 and all(ms > 0 for ms in times) and prefill_ms > 0
    assert step_cache.get_seq_length() == 12 + 3
    tokens = prompt[0].tolist()
    current = logits
    for _ in range(3):  # the same greedy tokens, recomputed without a cache
        tokens.append(int(current.argmax()))
        current, _ = timed_pass(model, torch.tensor([tokens]))
    assert int(last.argmax()) == int(current.argmax()) and torch.allclose(last, current, atol=1e-3)


def test_run_greedy_equals_model_generate(bundled):
    model, tokenizer = bundled.model, bundled.tokenizer
    ids = tokenizer("Once upon a time")["input_ids"]
    trace = run_greedy(model, tokenizer, ids, 12, stop_at_eos=False)
    assert trace.generated_ids == transformers_greedy(model, ids, 12)
    assert GREEDY.greedy and len(trace.records) == 12


def test_timing_keeps_the_repeats_not_the_warmups_and_reports_median_and_spread():
    values = iter([100.0, 90.0, 5.0, 1.0, 3.0, 2.0, 4.0])  # two slow warm-ups, then five repeats
    timing = repeat_timing(lambda: next(values), repeats=5, warmups=2, what="a test pass")
    assert timing.times_ms == (5.0, 1.0, 3.0, 2.0, 4.0)
    assert (timing.median_ms, timing.q1_ms, timing.q3_ms, timing.min_ms, timing.max_ms) == (3.0, 2.0, 4.0, 1.0, 5.0)
    assert timing.label() == "a test pass: 3.00 ms (middle half 2.00–4.00 ms), median of 5 after 2 warm-ups"
    assert Timing((1.0, 2.0, 3.0), warmups=1, what="x").how == "median of 3 after 1 warm-up"
    with pytest.raises(ValueError, match="repeats"):
        repeat_timing(lambda: 1.0, repeats=2)
    with pytest.raises(ValueError, match="warmups"):
        repeat_timing(lambda: 1.0, repeats=5, warmups=-1)


def test_pass_timing_keeps_every_pass_of_one_run_and_needs_two():
    timing = pass_timing([3.0, 1.0, 2.0, 9.0], "four passes")
    assert timing.median_ms == 2.5 and timing.times_ms == (3.0, 1.0, 2.0, 9.0) and timing.how == "median of 4"
    with pytest.raises(ValueError, match="2 timed passes"):
        pass_timing([1.0], "one")


def test_decode_step_timing_keeps_the_context_fixed_and_says_so(bundled):
    timing = time_decode_step(bundled.model, context_tokens=5, repeats=4, warmups=1)
    assert timing.repeats == 4 and all(ms > 0 for ms in timing.times_ms)
    assert timing.what == "one decode step at 5 tokens of context"


def test_compare_gives_the_ratio_of_medians_and_its_words_turn_with_the_data():
    faster = compare([10.0, 11.0, 12.0], [30.0, 32.0, 34.0])
    assert faster.ratio == pytest.approx(11 / 32) and not faster.too_close
    assert faster.words("more time", "less time") == "2.9x less time"
    assert compare([30.0, 32.0, 34.0], [10.0, 11.0, 12.0]).words("more time", "less time") == "2.9x more time"


def test_compare_says_too_close_to_call_when_the_middle_halves_overlap():
    tie = compare([10.0, 14.0, 11.0, 13.0], [12.0, 10.5, 13.5, 12.5])
    assert tie.too_close and tie.low <= 1 <= tie.high
    assert tie.words("faster", "slower") == "about the same (within this machine's noise)"


def test_compare_takes_a_timing_or_one_exact_number_and_refuses_zero():
    timing = pass_timing([2.0, 2.2, 2.1], "passes")
    assert compare(timing, 1.0).ratio == pytest.approx(2.1)
    assert compare(4.6, 1.0).words() == "4.6x more"  # one number each: exact, no noise to hide behind
    assert compare(1.021, 1.013).words("worse", "better") == "0.8% worse"  # never "1.0x worse"
    assert compare(0.97, 1.0).words() == "3.0% less"
    with pytest.raises(ValueError):
        compare([1.0], [0.0])
