"""#46 item 5 on Inside one pass: the pass walked part by part is not the plain decode step other pages time; the page
times both the one way (measuring.time_decode_step) and says what differs."""

import pytest
import torch

from inference.core.measuring import Timing
from inference.lessons.inside import text
from inference.lessons.inside.forward_pass import look_inside

pytestmark = pytest.mark.unit

torch.set_num_threads(1)


def test_the_sentence_names_both_timings_and_why_they_differ():
    plain = Timing((1.0, 1.2, 1.1, 0.9, 1.0), warmups=3, what="one decode step at 12 tokens of context")
    said = text.walked_vs_plain(5.45, plain)
    assert "5.45 ms" in said and "1.00 ms" in said and "median of 5 after 3 warm-ups" in said
    assert "5.5×" in said  # the walk's cost over the plain step
    assert "timing each part" in said  # why: the clock between parts, and the walk in Python


def test_look_inside_times_the_plain_decode_step_at_its_context(bundled):
    ids = bundled.tokenizer("Once upon a time there was a cat")["input_ids"]
    inside = look_inside(bundled.model, ids, decode_repeats=2)
    assert inside.plain_decode is not None
    assert inside.plain_decode.what == f"one decode step at {len(ids) - 1} tokens of context"
    assert inside.plain_decode.repeats >= 3
