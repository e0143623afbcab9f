"""Golden output: the bundled model's greedy continuation of a fixed prompt never drifts.

Any change to the weights, the tokenizer, the engine or the sampling math that alters a
single token fails here. If the model is retrained on purpose, regenerate with
`python -m tests.test_golden` and commit the new string with the new weights."""

import sys

import pytest

from inference.core.loader import encode_prompt, load_model
from inference.core.run import new_trace
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time, there was a little dog named Max."
NEW_TOKENS = 40
EXPECTED = (
    " Max loved to play with his ball. He would run and jump all day long. One day, Max saw a big box in the yard."
    " He wanted to know what was inside.\nMax tried"
)


def greedy_continuation(loaded) -> str:
    trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(loaded.tokenizer, PROMPT), NEW_TOKENS)
    list(trace.run(SamplingSettings(temperature=0)))
    return loaded.tokenizer.decode(trace.generated_ids)


def test_greedy_continuation_of_the_bundled_model_is_unchanged(bundled):
    assert greedy_continuation(bundled) == EXPECTED


if __name__ == "__main__":
    print(repr(greedy_continuation(load_model())))
    sys.exit(0)
