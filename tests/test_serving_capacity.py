"""Serving capacity's closed loop against the streaming stand-in for llama-server (the bundled model decoding in
this process): every client keeps one request waiting, the window holds only tokens that arrived while all were
in the loop, and the roofline's prediction is the same formula the Serve many page's roofline uses."""

import pytest

from inference.engines.client import LLAMACPP
from inference.lessons.serving import capacity
from inference.lessons.serving.replay import EngineTarget
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass
from tests.fake_engine import StreamingStandIn

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def standin(bundled):
    server = StreamingStandIn(bundled)
    yield server
    server.stop()


def test_closed_loop_counts_the_tokens_of_the_window(standin):
    target = EngineTarget(standin.url, LLAMACPP, "stand-in", 3)
    result = capacity.closed_loop(target, clients=3, requests_per_client=3, prompt_tokens=6, reply_tokens=5)
    assert result.failures == 0 and result.slots == 3 and result.clients == 3
    # 3 clients x 3 requests x 5 tokens arrived in all; the window (all clients in the loop) holds fewer
    assert 0 < result.tokens_in_window < 45 and result.window_s > 0
    assert result.tokens_per_s == result.tokens_in_window / result.window_s
    assert 6 <= result.mean_context <= 6 + 4  # prompt plus the reply tokens before each one


def test_prediction_is_the_roofline_of_one_decode_pass(bundled):
    from inference.core.paths import BUNDLED_MODEL_DIR

    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    roof = Roof(bandwidth_bytes_per_s=10e9, peak_flops=100e9)
    one = capacity.Capacity(1, 8, 100, 2.0, 30.4, 0)
    many = capacity.Capacity(8, 8, 400, 2.0, 30.6, 0)
    result = capacity.compare({1: one, 8: many}, served, roof)
    assert result.predicted_one == roof.tokens_per_s(decode_pass(served, 1, 30))
    assert result.predicted_many == roof.tokens_per_s(decode_pass(served, 8, 31))
    assert result.measured_ratio == 4.0
    # memory-bound at batch 8 on this roof: weights read once for 8 tokens, so close to 8x
    assert 1 < result.predicted_ratio <= 8
    figure = capacity.capacity_figure(result)
    assert [list(bar.y) for bar in figure.data] == [[50.0, 200.0], [result.predicted_one, result.predicted_many]]
    assert "400 tokens" in capacity.caption(result) and "Computed" in capacity.caption(result)
