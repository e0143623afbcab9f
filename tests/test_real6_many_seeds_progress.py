"""Same luck's many seeds report every stage to their bar: the bar is full only when the result is ready (on
SmolLM2 the scoring after the last decode step took minutes under a bar that already read "96 of 96")."""

import pytest

from inference.core.loader import encode_prompt
from inference.lessons.compare.shared_draws import many_seeds
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


def test_the_bar_reaches_its_total_only_at_the_last_stage(bundled):
    calls = []
    settings = SamplingSettings(temperature=1.0)
    many_seeds(
        bundled.model,
        bundled.model,
        bundled.tokenizer,
        bundled.model,
        encode_prompt(bundled.tokenizer, "Once upon a time"),
        settings,
        settings,
        seeds=[0, 1],
        max_new_tokens=4,
        progress=lambda done, total, what: calls.append((done, total, what)),
    )
    totals = {total for _, total, _ in calls}
    assert totals == {2 * 4 + 3}
    labels = [what for _, _, what in calls]
    assert labels[-3:] == ["scoring A's texts with the float32 model", "scoring B's texts with the float32 model",
                           "bootstrap intervals"]  # fmt: skip
    assert max(done for done, _, what in calls if what in ("A", "B")) <= 2 * 4 < 2 * 4 + 3
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)
