"""Constrained decoding on the bundled model: every text fits its format by an oracle independent of
llguidance (jsonschema, re.fullmatch, the list), the mask is exactly the library's allowed set, Z_t is
the model's own mass on it, and with the mask off the pipeline is untouched."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from inference import constrained as cli
from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.lessons.constrained.formats import CHOICES, JSON_SCHEMA, PRESETS, REGEX, Format, FormatError
from inference.lessons.constrained.run import ConstrainedRun
from inference.lessons.constrained.strategies import compare_strategies
from inference.lessons.constrained.text import sentence_token
from inference.sampling.pipeline import MASK, SamplingSettings, pack_allowed, stage_logits, unpack_allowed

pytestmark = pytest.mark.unit

SAMPLED = SamplingSettings(temperature=1.0)
PET = {
    "type": "object",
    "properties": {"animal": {"enum": ["cat", "dog", "bird"]}, "happy": {"type": "boolean"}},
    "required": ["animal", "happy"],
    "additionalProperties": False,
}
GREEDY = SamplingSettings(temperature=0)
FORMATS = {
    **{name: fmt for name, (fmt, _) in PRESETS.items()},
    "JSON: a pet": Format(JSON_SCHEMA, json.dumps(PET)),
    "Regex: a name": Format(REGEX, r"[A-Z][a-z]{2,8}"),
}
PROMPT = "Once upon a time, there was a little girl named Lily."


@pytest.fixture(scope="module")
def prompt_ids(bundled):
    return encode_prompt(bundled.tokenizer, PROMPT)


def allowed_by_library(matcher, vocab: int) -> torch.Tensor:
    """The library's allowed set read through another of its calls: one byte per token (0 or 200)."""
    bias = np.frombuffer(matcher.compute_logit_bias(), dtype=np.uint8)[:vocab]
    return torch.from_numpy(bias > 0)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_sampled_text_fits_its_format_for_4_seeds(bundled, prompt_ids, name):
    fmt = FORMATS[name]
    for seed in range(4):
        run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80, seed=seed)
        run.run(SAMPLED)
        assert run.complete and run.trace.stop_reason == "eos", (name, seed, run.text)
        assert fmt.matches(run.text), (name, seed, run.text)


@pytest.mark.parametrize("seed", range(2))
def test_with_the_mask_off_the_same_seeds_give_the_plain_pipelines_tokens(bundled, prompt_ids, seed):
    settings = SamplingSettings(temperature=0.9, top_p=0.95)
    plain = new_trace(bundled.model, bundled.tokenizer, prompt_ids, 12, seed=seed)
    list(plain.run(settings))
    unmasked = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, None, 12, seed=seed)
    unmasked.run(settings)
    assert unmasked.trace.generated_ids == plain.generated_ids
    everything = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, None, 12, seed=seed)
    allow_all = replace(settings, allowed_tokens=pack_allowed(torch.ones(plain.vocab_size, dtype=torch.bool)))
    everything.run(allow_all)  # a mask that allows every token is a stage that changes nothing
    assert everything.trace.generated_ids == plain.generated_ids
    assert [r.prob for r in everything.records] == [r.prob for r in plain.records]


def test_settings_without_a_format_run_exactly_the_stages_they_ran_before():
    settings = SamplingSettings(temperature=0.7, top_k=40, top_p=0.9, min_p=0.05)
    assert MASK not in settings.pipeline and settings.allowed_tokens is None
    assert settings.pipeline == ("penalty", "temperature", "top_k", "top_p", "min_p")
    masked = replace(settings, allowed_tokens=b"\xff" * 512)
    assert masked.pipeline[0] == MASK and masked.pipeline[1:] == settings.pipeline
    later = replace(masked, order=("penalty", "temperature", "top_k", MASK))
    assert later.pipeline == ("penalty", "temperature", "top_k", MASK, "top_p", "min_p")


def test_packed_bits_round_trip_in_llguidances_layout():
    allowed = torch.zeros(4096, dtype=torch.bool)
    allowed[[0, 1, 31, 32, 4095]] = True
    packed = pack_allowed(allowed)
    assert torch.equal(unpack_allowed(packed)[:4096], allowed)
    words = np.frombuffer(packed, dtype="<i4")  # llguidance's int32 words: bit i of word i // 32
    assert words[0] == (1 << 0) | (1 << 1) | -(1 << 31) and words[1] == 1 and words[127] == -(1 << 31)


@pytest.mark.parametrize("name", ["JSON: a name and an age", "Regex: a date", "JSON: a pet"])
def test_the_mask_is_the_librarys_allowed_set_and_nothing_outside_it_survives(bundled, prompt_ids, name):
    fmt = FORMATS[name]
    run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80, seed=5)
    run.run(SamplingSettings(temperature=1.0, top_p=0.9))
    replay = fmt.matcher(bundled.tokenizer, run.trace.vocab_size)
    seen = run.trace.seen_masks()
    for i, (record, step) in enumerate(zip(run.records, run.steps)):
        library = allowed_by_library(replay, run.trace.vocab_size)
        ours = record.settings.allowed_mask(run.trace.vocab_size)
        assert torch.equal(ours, library), i
        if i < 3:  # and token by token, through the library's one-token check
            one_by_one = torch.tensor([replay.validate_tokens([t]) == 1 for t in range(run.trace.vocab_size)])
            assert torch.equal(ours, one_by_one), i
        stages = stage_logits(record.logits, record.settings, seen[i])
        assert not torch.isfinite(stages[MASK][~library]).any()
        final = stages[record.settings.pipeline[-1]]
        assert not torch.isfinite(final[~library]).any() and bool(library[record.token_id])
        assert step.allowed == int(library.sum())
        raw = torch.softmax(record.logits.double(), -1).numpy()
        assert step.allowed_mass == pytest.approx(float(raw[library.numpy()].sum()), rel=1e-12, abs=1e-15)
        assert replay.consume_token(record.token_id)


def test_greedy_strategies_pick_the_same_tokens_and_the_replay_reproduces_the_run(bundled, prompt_ids):
    fmt = FORMATS["JSON: a name and an age"]
    run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80)
    run.run(GREEDY)
    cost = compare_strategies(run)
    assert cost.steps == len(run.records) and all(cost.same_token)
    greedy_valid = [r.token_id == int(r.logits.argmax()) for r in run.records]
    assert cost.first_valid == greedy_valid  # the unmasked argmax was allowed exactly where it was chosen
    assert 0 < sum(cost.first_valid) < cost.steps
    for i, valid in enumerate(cost.first_valid):  # the strategies' costs are their parts, summed per step
        first = cost.draw_us[i] + cost.check_us[i] + (0 if valid else cost.mask_us[i] + cost.masked_draw_us[i])
        assert cost.sample_first_us[i] == pytest.approx(first)
        assert cost.mask_all_us[i] == pytest.approx(cost.mask_us[i] + cost.masked_draw_us[i])


def test_an_invalid_schema_or_regex_is_one_sentence(bundled):
    cases = [
        (Format(JSON_SCHEMA, '{"type": "object",'), "The schema is not valid JSON"),
        (Format(JSON_SCHEMA, '{"type": "integer", "minimum": 5, "maximum": 3}'), "The schema cannot be used"),
        (Format(REGEX, "[a-"), "The regex cannot be used: unclosed character class."),
        (Format(CHOICES, "\n \n"), "The list of choices is empty"),
    ]
    for fmt, start in cases:
        with pytest.raises(FormatError) as caught:
            fmt.matcher(bundled.tokenizer, 4096)
        message = str(caught.value)
        assert message.startswith(start) and "\n" not in message and message.count(". ") == 0, message


def test_a_format_no_token_can_produce_stops_with_one_sentence_and_keeps_the_run(bundled, prompt_ids):
    never = Format(REGEX, r"[^\s\S]")  # a character class nothing is in: no token can start it
    run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, never, 10)
    with pytest.raises(FormatError, match="No token of this tokenizer can continue the format"):
        run.step(GREEDY)
    assert run.records == [] and not run.finished


def test_a_mask_after_a_filter_that_left_nothing_allowed_is_refused_and_the_run_goes_on(bundled, prompt_ids):
    fmt = FORMATS["JSON: a name and an age"]
    run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80)
    run.run(GREEDY, max_steps=2)
    before = list(run.trace.generated_ids)
    top_one_first = SamplingSettings(temperature=1.0, top_k=1, order=("top_k", MASK))
    with pytest.raises(FormatError, match="move the mask earlier"):
        run.run(top_one_first)  # the model's top token is not '"' or a space here: nothing survives
    assert run.trace.generated_ids == before and len(run.steps) == 2
    run.run(GREEDY)
    assert run.complete and fmt.matches(run.text)


def test_back_steps_the_matcher_back_too(bundled, prompt_ids):
    fmt = FORMATS["JSON: a name and an age"]
    run = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80)
    run.run(GREEDY, max_steps=6)
    run.back()
    run.back()
    run.run(GREEDY)
    straight = ConstrainedRun(bundled.model, bundled.tokenizer, prompt_ids, fmt, 80)
    straight.run(GREEDY)
    assert run.trace.generated_ids == straight.trace.generated_ids


def test_the_command_line_prints_the_issues_json_fields(tmp_path, capsys):
    schema = tmp_path / "person.json"
    schema.write_text(PRESETS["JSON: a name and an age"][0].spec)
    code = cli.main(["--prompt", PROMPT, "--json-schema", str(schema), "--max-new-tokens", "60", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["valid"] and result["error"] is None
    assert {"text", "steps", "logprob", "logprob_unconstrained"} <= result.keys()
    assert re.fullmatch(r"\{.*\}", result["text"], re.S) and result["logprob"] < result["logprob_unconstrained"] < 0
    step = result["steps"][0]
    assert step.keys() == {"token_id", "allowed", "allowed_mass", "mask_us"} and step["allowed"] == 1
    assert cli.main(["--prompt", PROMPT, "--regex", "[a-", "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {"error": "The regex cannot be used: unclosed character class."}
    assert cli.main(["--prompt", PROMPT, "--json-schema", str(schema), "--max-new-tokens", "4", "--json"]) == 2
    short = json.loads(capsys.readouterr().out)  # too few tokens: the text so far, and why it does not fit
    assert len(short["steps"]) == 4 and short["text"].startswith("{") and not short["valid"]
    assert short["error"].startswith("The format needs more tokens than the 4 allowed")


def test_the_step_sentence_names_an_indent_token_as_its_chart_does(smollm2):
    tokenizer = smollm2.tokenizer
    indent = tokenizer.encode("\n" + " " * 8, add_special_tokens=False)
    assert len(indent) == 1, "SmolLM2 has one token for a newline and an 8-space indent"
    shown = sentence_token(tokenizer, indent[0])
    assert "␣×8" in shown and "␣␣" not in shown  # counted, not drawn mark by mark
    assert sentence_token(tokenizer, tokenizer.encode(" Paris", add_special_tokens=False)[0]) == "&#39;␣Paris&#39;"
