"""Plain decoding timed a round at a time: the page's kept PlainTimer feeds the same logits as timing the whole
text at once, times each token once, and starts over when the text is not a continuation (Back, another run)."""

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.lessons.speculative import comparison
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

SETTINGS = SamplingSettings(temperature=0.8)


@pytest.fixture
def drawn(monkeypatch):
    """Every logits row the timer's token choice saw, in order."""
    rows = []
    real = comparison.choose_token
    monkeypatch.setattr(
        comparison, "choose_token", lambda logits, *args: rows.append(logits.clone()) or real(logits, *args)
    )
    return rows


def test_timing_in_pieces_feeds_what_timing_at_once_feeds(bundled, drawn):
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    tokens = [int(t) for t in encode_prompt(bundled.tokenizer, " there was a little girl who liked to play")]
    whole = comparison.time_plain(bundled.model, prompt, tokens, SETTINGS)
    at_once, drawn[:] = list(drawn), []

    timer = comparison.PlainTimer(bundled.model, prompt, SETTINGS)
    first = timer.extend(tokens[:3])
    assert len(first.step_ms) == 3 and len(drawn) == 3
    second = timer.extend(tokens)  # only the new tokens are timed
    assert len(drawn) == len(tokens) and len(second.step_ms) == len(whole.step_ms) == len(tokens)
    assert second.forward_ms[:3] == first.forward_ms  # the first three keep their times
    assert all(torch.equal(a, b) for a, b in zip(at_once, drawn, strict=True))


def test_a_text_that_is_not_a_continuation_is_timed_from_the_start(bundled, drawn):
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    tokens = [int(t) for t in encode_prompt(bundled.tokenizer, " there was a dog")]
    timer = comparison.PlainTimer(bundled.model, prompt, SETTINGS)
    timer.extend(tokens)
    drawn[:] = []
    after_back = timer.extend(tokens[:2] + [tokens[0]])  # Back, then another token drawn
    assert len(after_back.step_ms) == 3 and len(drawn) == 3
    comparison.time_plain(bundled.model, prompt, tokens[:2] + [tokens[0]], SETTINGS)
    fresh = drawn[3:]
    assert all(torch.equal(a, b) for a, b in zip(drawn[:3], fresh, strict=True))


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=0.0),
        SamplingSettings(temperature=0.0, repetition_penalty=1.3),  # the penalty before the argmax
        SETTINGS,
        SamplingSettings(temperature=0.9, top_k=40, top_p=0.9, min_p=0.05, repetition_penalty=1.2),
    ],
    ids=["greedy", "greedy-penalty", "t0.8", "all-filters"],
)
def test_the_benchmarks_lean_plain_decoding_writes_the_apps_trace_tokens(bundled, settings):
    """The benchmark's baseline (`plain_decode`, nothing recorded) is the same decoding as a Generate trace:
    greedy the same tokens, sampled the same tokens for the same seed (both draw step i with the seed's u_i)."""
    prompt = encode_prompt(bundled.tokenizer, "Once upon a time")
    trace = new_trace(bundled.model, bundled.tokenizer, prompt, 40, seed=3, stop_at_eos=False)
    list(trace.run(settings))
    assert comparison.plain_decode(bundled.model, prompt, 40, settings, seed=3) == trace.generated_ids
