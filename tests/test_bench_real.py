"""The real model's bench keys (inference/bench/engine.py's `real_figures`): present and sensible, never asserted as
speeds."""

import pytest

from inference.bench import engine
from inference.core import real_model

pytestmark = pytest.mark.unit


def test_the_keys_come_from_a_run_of_the_real_model(smollm2):
    """TTFT, decode rate and the bandwidth limit from a short greedy run; the limit is bytes over bandwidth."""
    figures = engine.real_figures(decode_tokens=4, repeats=1, bandwidth_gbs=20.0)
    assert figures["real_model"] == real_model.REAL_MODEL_NAME
    assert figures["real_ttft_ms"] > 0 and figures["real_decode_tokens_per_s"] > 0
    assert figures["real_weight_bytes"] == smollm2.info.weight_bytes
    assert figures["real_bandwidth_limit_tokens_per_s"] == round(20e9 / smollm2.info.weight_bytes, 1)


def test_without_the_wheel_there_are_no_keys_and_a_reason(monkeypatch, capsys):
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    assert engine.real_figures() == {}
    assert "requirements-models.txt" in capsys.readouterr().out
