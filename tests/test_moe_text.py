"""What the MoE page says is filled from its numbers: the intro's verdict on the bundled MoE (#46 item 4: never a
promise its own measurement contradicts) and the comparison words of the timings, from `measuring.compare`."""

import math

import pandas as pd
import pytest

from inference.core.paths import BUNDLED_MODEL_DIR
from inference.core.routing import BUNDLED_MOE_DIR
from inference.lessons.moe import stored
from inference.lessons.moe import text as moe_text
from inference.lessons.moe.experts import DecodeTimes
from inference.lessons.moe.scale import DENSE_ACTIVE, DENSE_TOTAL, MOE

pytestmark = pytest.mark.unit


def pair(moe_heldout: float, dense_heldout: float) -> stored.TrainedPair:
    return stored.TrainedPair(moe_heldout, dense_heldout, 0.24, 0.21, 8_192_000, 16_399_616, 5.8e6)


def test_the_intro_says_what_the_bundled_moe_measured_and_why():
    worse = moe_text.intro_verdict(pair(1.021, 1.013), "storyteller-moe-16m", "storyteller-llama-6m")
    assert "1.021" in worse and "1.013" in worse and "more bits per byte (worse)" in worse
    assert "16M parameters" in worse and "5.8 MB" in worse and "too little" in worse
    better = moe_text.intro_verdict(pair(0.98, 1.013), "m", "d")
    assert "fewer bits per byte (better)" in better and "too little" not in better
    assert "Whether" in moe_text.intro_verdict(None, "m", "d")


def test_the_bundled_pair_reads_its_training_text_size_from_the_trainers_figures():
    moe_meta, dense_meta = stored.training_stats(BUNDLED_MOE_DIR), stored.training_stats(BUNDLED_MODEL_DIR)
    if moe_meta is None or dense_meta is None:
        pytest.skip("the bundled MoE is not in assets/models")
    got = stored.trained_pair({}, moe_meta, dense_meta)
    per_token = moe_meta["train_nats_per_token"] / (math.log(2) * moe_meta["train_bits_per_byte"])
    assert got.corpus_bytes == pytest.approx(moe_meta["train_tokens_in_corpus"] * per_token)
    assert got.parameters == moe_meta["parameters"]


def test_timings_inside_the_runs_noise_get_no_comparison_word():
    timed = DecodeTimes({"dense": [2.0, 2.6, 1.6], "moe": [2.1, 2.5, 1.7]}, "CPU", 1, 3, 8, 12)
    assert "about the same speed (within this machine's noise)" in moe_text.timed_finding(timed, "dense", "moe")
    slow = DecodeTimes({"dense": [2.0, 2.1, 1.9], "moe": [4.0, 4.2, 3.8]}, "CPU", 1, 3, 8, 12)
    assert "2.0x slower than the dense model" in moe_text.timed_finding(slow, "dense", "moe")


def test_the_scale_findings_compare_the_models_measured_runs():
    rows = []
    for name, runs, total in (
        (DENSE_ACTIVE, [10.0, 10.2, 9.8], 5e6),
        (MOE, [13.0, 13.1, 12.9], 20e6),
        (DENSE_TOTAL, [30.0], 20e6),
    ):
        rows.append(
            {
                "model": name,
                "total_parameters": total,
                "active_parameters": 5e6,
                "weight_bytes": total * 4,
                "decode_ms_per_token": runs[0],
                "decode_ms_runs": runs,
                "batch": 16,
                "batch_ms_per_pass": 20.0,
                "experts_read_alone": 2.0,
                "experts_read_in_batch": 7.5,
                "decode_vs_dense_active": runs[0] / 10.0,
                "batch_vs_dense_active": 1.5,
            }
        )
    said = moe_text.scale_findings(pd.DataFrame(rows), 8)
    assert "4.0x more" in said and "1.3x slower than the small model: the router" in said and "7.5 of 8" in said
