"""The serving and engine-internals lessons on SmolLM2-135M-Instruct where its wheel is installed (issue #45): the
model choice, its shape and the sentences that say what the engine serves (unit)."""

import pytest

from inference.core import real_model
from inference.lessons.engine_internals import served
from inference.lessons.serving import experiments
from inference.lessons.serving import text as serving_text


@pytest.mark.unit
def test_the_memory_bound_model_is_the_real_one_where_the_wheel_is_installed():
    if real_model.is_available():
        assert served.MEMORY_BOUND == experiments.REAL == real_model.REAL_MODEL_NAME
    else:
        assert served.MEMORY_BOUND != experiments.REAL
        assert "random-weights" in served.FALLBACK_NOTE and real_model.INSTALL_HINT in served.FALLBACK_NOTE


@pytest.mark.unit
def test_real_model_on_the_engine(smollm2):
    model = served.engine_model(served.REAL)
    assert (model.layers, model.kv_width, model.vocab) == (30, 3 * 64, 49_152)
    assert not model.timing_only and "dequantized" in model.label
    assert experiments.weight_file(experiments.REAL).stat().st_size > 500_000_000


@pytest.mark.unit
def test_serving_sentences_say_what_the_requests_are():
    note = serving_text.real_model_note(16, 538_090_496)
    assert (
        "538 MB of float32 weights" in note
        and "pretrained" in note
        and "16 everyday questions" in note
        and "random" not in note
    )
    assert "random-weights" in serving_text.REAL_FALLBACK
