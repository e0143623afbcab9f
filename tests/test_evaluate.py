"""Bits per byte: every token scored exactly once, whatever the window and stride."""

import math

import pytest
import torch

from inference.training.evaluate import score_stream

pytestmark = pytest.mark.unit


class UniformModel:
    """Logits of zeros: every next token costs exactly ln(10) nats."""

    calls: list[int]

    def __call__(self, ids):
        self.calls.append(ids.shape[1])
        return type("Out", (), {"logits": torch.zeros(1, ids.shape[1], 10)})()


@pytest.mark.parametrize("window,stride", [(512, 512), (512, 256), (8, 3), (8, 8), (8, 1)])
def test_every_token_after_the_first_is_scored_once(window, stride):
    model = UniformModel()
    model.calls = []
    report = score_stream(model, list(range(10)) * 100, n_bytes=2000, window=window, stride=stride)
    assert report.tokens_scored == 999
    assert report.nats_per_token == pytest.approx(math.log(10))
    assert report.bits_per_byte == pytest.approx(999 * math.log(10) / math.log(2) / 2000)
    assert max(model.calls) <= window


def test_a_perfect_model_scores_zero_bits():
    class Oracle:
        def __call__(self, ids):
            logits = torch.full((1, ids.shape[1], 5), -1e4)
            nxt = (ids[0] + 1) % 5  # the stream below counts 0,1,2,3,4,0,...
            logits[0, torch.arange(ids.shape[1]), nxt] = 0
            return type("Out", (), {"logits": logits})()

    report = score_stream(Oracle(), [i % 5 for i in range(200)], n_bytes=200, window=16, stride=8)
    assert report.bits_per_byte == pytest.approx(0, abs=1e-9)
