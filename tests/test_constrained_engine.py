"""Greedy under a format equals llama.cpp's server given the same format: its `json_schema` (which llama.cpp
converts to its own GBNF grammar) and a GBNF grammar for a list of choices, on the same prompts. Both pick the
most likely allowed token over the same token ids (the GGUF carries the bundled tokenizer), every spelling of
forced text allowed on both sides (llguidance's forcing is off).

Where they cannot agree, and why: llama.cpp's converter puts its optional `space` in some places only (after
'{', ',' and ':', before ':' and '}', after a plain string or a number, but not after a string with a
maxLength), while llguidance's JSON allows its whitespace (set to llama.cpp's `space` rule) between any two
tokens. A greedy run that takes whitespace where llama.cpp allows none parts there; then the test requires the
same tokens up to that whitespace and the same JSON value."""

import json

import pytest

from inference.core.loader import encode_prompt
from inference.lessons.constrained.formats import CHOICES, JSON_SCHEMA, PRESETS, Format
from inference.lessons.constrained.on_engine import engine_greedy
from inference.lessons.constrained.run import ConstrainedRun
from inference.sampling.pipeline import SamplingSettings
from tests.test_constrained import PET
from tests.test_engines import llama_server  # noqa: F401  (the session's llama-server fixture)

pytestmark = pytest.mark.engine

CASES = [
    (PRESETS["JSON: a name and an age"][0], PRESETS["JSON: a name and an age"][1]),
    (PRESETS["JSON: a name and an age"][0], "Once upon a time, there was a little girl named Lily."),
    (Format(JSON_SCHEMA, json.dumps(PET)), "Tom had a pet. He wrote down what it was:"),
    (Format(CHOICES, "yes\nno"), PRESETS["Choice: yes or no"][1]),
]


@pytest.mark.parametrize("fmt,prompt", CASES, ids=["person", "person-story", "pet", "yes-no"])
def test_greedy_under_a_format_equals_llama_servers_json_schema_output(bundled, llama_server, fmt, prompt):  # noqa: F811
    prompt_ids = encode_prompt(bundled.tokenizer, prompt)
    ours = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80)
    ours.run(SamplingSettings(temperature=0))
    assert ours.complete and fmt.matches(ours.text)
    theirs = engine_greedy(llama_server.url, prompt_ids, fmt, 80)
    assert theirs.stop_reason == "eos" and theirs.token_ids[-1] in ours.trace.eos_ids
    assert theirs.timings.predicted_ms is not None and theirs.timings.predicted_ms > 0
    their_ids = theirs.token_ids[:-1]
    if their_ids == ours.text_ids:
        assert theirs.text == ours.text
        return
    assert fmt.kind == JSON_SCHEMA, (ours.text, theirs.text)
    parted = next(i for i, (a, b) in enumerate(zip(ours.text_ids, their_ids)) if a != b)
    assert bundled.tokenizer.decode([ours.text_ids[parted]]).isspace(), (ours.text, theirs.text)
    assert json.loads(ours.text) == json.loads(theirs.text), (ours.text, theirs.text)
