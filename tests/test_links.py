"""A Generate link's step schedule: encoded from the records, decoded to one (settings, seed) per step."""

from dataclasses import dataclass

import pytest

from inference.lessons.generate.links import LinkError, schedule_param, step_plan
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


@dataclass
class Record:
    index: int
    settings: SamplingSettings
    seed: int


def test_a_run_drawn_with_the_urls_settings_needs_no_schedule():
    now = SamplingSettings(temperature=0.8)
    assert schedule_param([Record(i, now, 3) for i in range(5)], now, 3) is None
    assert step_plan("", 2, now, 3) == [(now, 3), (now, 3)]


def test_every_step_gets_back_the_settings_and_seed_it_was_drawn_with():
    a = SamplingSettings(temperature=0.8, top_p=0.9)
    b = SamplingSettings(temperature=1.4, top_p=0.9, order=("temperature", "top_k", "top_p", "min_p", "penalty"))
    records = [Record(i, a, 1) for i in range(4)] + [Record(i, b, 1) for i in range(4, 7)] + [Record(7, b, 2)]
    param = schedule_param(records, b, 2)
    assert param is not None and len(param) < 200
    assert step_plan(param, 8, b, 2) == [(r.settings, r.seed) for r in records]


def test_a_damaged_schedule_is_one_sentence():
    with pytest.raises(LinkError, match="could not be read"):
        step_plan("not-a-schedule", 3, SamplingSettings(), 0)
    with pytest.raises(LinkError, match="characters long"):
        step_plan("x" * 5000, 3, SamplingSettings(), 0)
