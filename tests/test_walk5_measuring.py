"""One way to time a pass for every page (#46 item 5): warm-ups not kept, repeats, the median and the spread
shown, and a label that says what was timed."""

import pytest
import torch

from inference.core.measuring import Timing, repeat_timing, time_decode_step

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # other jobs may share the machine


def test_timing_keeps_the_repeats_not_the_warmups_and_reports_median_and_spread():
    values = iter([100.0, 90.0, 5.0, 1.0, 3.0, 2.0, 4.0])  # two slow warm-ups, then five repeats
    timing = repeat_timing(lambda: next(values), repeats=5, warmups=2, what="a test pass")
    assert timing.times_ms == (5.0, 1.0, 3.0, 2.0, 4.0)
    assert timing.median_ms == 3.0 and timing.q1_ms == 2.0 and timing.q3_ms == 4.0
    assert timing.min_ms == 1.0 and timing.max_ms == 5.0
    assert timing.how == "median of 5 after 2 warm-ups"
    assert timing.label() == "a test pass: 3.00 ms (middle half 2.00–4.00 ms), median of 5 after 2 warm-ups"


def test_timing_refuses_too_few_repeats_for_a_spread():
    with pytest.raises(ValueError, match="repeats"):
        repeat_timing(lambda: 1.0, repeats=2)
    with pytest.raises(ValueError, match="warmups"):
        repeat_timing(lambda: 1.0, repeats=5, warmups=-1)


def test_one_warmup_reads_singular():
    assert Timing((1.0, 2.0, 3.0), warmups=1, what="x").how == "median of 3 after 1 warm-up"


def test_decode_step_timing_keeps_the_context_fixed_and_says_so(bundled):
    model = bundled.model
    timing = time_decode_step(model, context_tokens=5, repeats=4, warmups=1)
    assert timing.repeats == 4 and all(ms > 0 for ms in timing.times_ms)
    assert timing.what == "one decode step at 5 tokens of context"
    assert timing.label().startswith("one decode step at 5 tokens of context: ")
    assert timing.label().endswith("median of 4 after 1 warm-up")
