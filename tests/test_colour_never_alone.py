"""Kept, cut and chosen tokens differ by more than colour on Generate's next-token chart (#47 item 4)."""

import numpy as np
import pytest

from inference.lessons.generate.figures import next_token_bars

pytestmark = pytest.mark.unit

TABLE = {
    "token": np.array([" Paris", " the", " London", "other (3 tokens)"], dtype=object),
    "rank": np.array([1.0, 2.0, 3.0, np.nan]),
    "chosen": np.array([False, True, False, False]),
    "removed_by": np.array(["", "", "top_p", ""], dtype=object),
    "raw": np.array([0.6, 0.25, 0.1, 0.05]),
    "final": np.array([0.7, 0.3, 0.0, 0.0]),
}


def test_a_cut_tokens_raw_bar_is_hatched_and_no_other_is():
    raw, final = next_token_bars(TABLE).to_dict()["data"]
    by_name = dict(zip(raw["y"], raw["marker"]["pattern"]["shape"]))  # the chart lists the least likely first
    hatched = [name for name, shape in by_name.items() if shape]
    assert hatched == ["3. ' London'  ✂ top-p"]
    assert final["marker"]["pattern"]["shape"] == list(reversed(["", "", "/", ""]))


def test_the_chosen_and_the_cut_token_are_labelled_not_only_coloured():
    names = next_token_bars(TABLE).to_dict()["data"][1]["y"]
    assert "▶ 2. ' the'" in names
    assert any("✂ top-p" in name for name in names)
