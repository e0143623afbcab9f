"""One way to time what a page quotes (`measuring.Timing`): warm-ups not kept, the median and the middle half, a
label saying what was timed; passes of one run as a Timing; one decode step at a fixed context."""

import pytest
import torch

from inference.core.measuring import Timing, pass_timing, repeat_timing, time_decode_step
from inference.lessons.speculative import verdicts
from inference.lessons.speculative.comparison import PlainTiming
from tests.test_speculative_text import _comparison

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # other jobs may share the machine


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


def test_speculatives_plain_step_is_a_timing_named_in_the_cost_sentence():
    plain = PlainTiming(forward_ms=[50.0, 10.0, 12.0, 11.0, 30.0], step_ms=[51.0, 11.0, 13.0, 12.0, 31.0])
    assert plain.decode_step.median_ms == plain.decode_pass_ms == 11.5  # the prefill (50 ms) left out
    assert PlainTiming(forward_ms=[50.0, 10.0], step_ms=[51.0, 11.0]).decode_pass_ms == 10.0  # one step: no spread
    assert _comparison().plain.decode_step.label() in verdicts.cost_sentence(_comparison())
