"""The Speculative page's sweep on both sides of the trade (issue #29): the page's bundled target and the other
bundled target, each tagged with its name and its weights (what decides whether a verify pass costs little more than a
one-token pass)."""

import pandas as pd
import pytest

from inference.core import machine
from inference.core.loader import load_model
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.routing import BUNDLED_MOE_DIR, BUNDLED_MOE_NAME
from inference.lessons.speculative import drafting
from inference.lessons.speculative import sweep as spec_sweep

pytestmark = pytest.mark.unit


def test_each_bundled_target_has_the_other_as_its_other_side():
    assert drafting.other_side(BUNDLED_MODEL_NAME) == (BUNDLED_MOE_NAME, str(BUNDLED_MOE_DIR))
    assert drafting.other_side(BUNDLED_MOE_NAME) == (BUNDLED_MODEL_NAME, "")  # "": the loader's bundled model
    assert drafting.other_side("HuggingFaceTB/SmolLM2-135M") is None


def test_the_sweep_runs_on_every_side_with_one_progress_bar(bundled, monkeypatch):
    moe = load_model(str(BUNDLED_MOE_DIR))
    seen, progress = [], []

    def fake_sweep(target, tokenizer, make_drafter, prompt_ids, new_tokens, progress=None):
        seen.append((target, tokenizer, tuple(prompt_ids), new_tokens))
        for done in range(3):
            progress(done, 2, f"run {done}")
        return pd.DataFrame({"gamma": [1, 2], "measured_speedup": [0.9, 1.1]})

    monkeypatch.setattr(spec_sweep, "sweep", fake_sweep)
    sides = [(BUNDLED_MODEL_NAME, bundled.model, bundled.tokenizer), (BUNDLED_MOE_NAME, moe.model, moe.tokenizer)]
    table = spec_sweep.sweep_sides(sides, lambda: None, [1, 2, 3], 12, progress=lambda *a: progress.append(a))
    assert [s[0] for s in seen] == [bundled.model, moe.model] and all(s[2:] == ((1, 2, 3), 12) for s in seen)
    assert table["target"].tolist() == [BUNDLED_MODEL_NAME] * 2 + [BUNDLED_MOE_NAME] * 2
    sizes = [spec_sweep.weight_bytes(bundled.model)] * 2 + [spec_sweep.weight_bytes(moe.model)] * 2
    assert table["weight_bytes"].tolist() == sizes and sizes[0] < sizes[2]  # the MoE model holds more weights
    assert bundled.model.num_parameters() * 4 == sizes[0]  # float32, tied weights once
    assert table["fits_cache"].tolist() == [machine.weights_fit_in_cache(size) for size in sizes]
    done = [p[0] for p in progress]
    assert done == sorted(done) and {p[1] for p in progress} == {4} and progress[-1][2].startswith(BUNDLED_MOE_NAME)
