"""#46 item 4: the MoE page's intro never promises what its own measurements contradict: it says what the bundled MoE
measured against the dense model, and why (a small MoE trained on little text)."""

import math

import pytest

from inference.core.paths import BUNDLED_MODEL_DIR
from inference.core.routing import BUNDLED_MOE_DIR
from inference.lessons.moe import stored
from inference.lessons.moe import text as moe_text

pytestmark = pytest.mark.unit


def pair(moe_heldout: float, dense_heldout: float) -> stored.TrainedPair:
    return stored.TrainedPair(moe_heldout, dense_heldout, 0.24, 0.21, 8_192_000, 16_399_616, 5.8e6)


def test_the_fixed_intro_makes_no_promise_of_its_own():
    assert "know more" not in moe_text.INTRO


def test_a_worse_moe_is_called_worse_with_its_numbers_size_data_and_why():
    said = moe_text.intro_verdict(pair(1.021, 1.013), "storyteller-moe-16m", "storyteller-llama-6m")
    assert "1.021" in said and "1.013" in said and "worse" in said
    assert "16M parameters" in said and "5.8 MB" in said
    assert "too little" in said  # why


def test_a_better_moe_is_called_better_and_no_excuse_is_made():
    said = moe_text.intro_verdict(pair(0.98, 1.013), "m", "d")
    assert "better" in said and "worse" not in said and "too little" not in said


def test_without_stored_figures_the_promise_is_conditional():
    said = moe_text.intro_verdict(None, "m", "d")
    assert "whether" in said.lower() and "measure" in said


def test_the_bundled_pair_reads_its_training_text_size_from_the_trainers_figures():
    moe_meta, dense_meta = stored.training_stats(BUNDLED_MOE_DIR), stored.training_stats(BUNDLED_MODEL_DIR)
    if moe_meta is None or dense_meta is None:
        pytest.skip("the bundled MoE is not in assets/models")
    got = stored.trained_pair({}, moe_meta, dense_meta)
    per_token = moe_meta["train_nats_per_token"] / (math.log(2) * moe_meta["train_bits_per_byte"])
    assert got.corpus_bytes == pytest.approx(moe_meta["train_tokens_in_corpus"] * per_token)
    assert got.parameters == moe_meta["parameters"]


def test_the_cost_pages_moe_pointer_promises_no_speed_it_does_not_measure():
    from inference.lessons.cost import text as cost_text

    assert "time for its active ones" not in cost_text.TEXT["moe"]
    assert "measurement" in cost_text.TEXT["moe"]
