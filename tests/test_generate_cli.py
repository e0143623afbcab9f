"""`python -m inference.generate`: the step engine from the command line, its JSON checked against the model's own
forward pass, names in any case, and one-line errors with exit status 2."""

import json
import os
import subprocess
import sys

import pytest
import torch

from inference import generate
from inference.core import real_model
from inference.core.paths import BUNDLED_MODEL_NAME, PROJECT_ROOT

pytestmark = pytest.mark.unit


def cli_json(capsys, *args: str) -> dict:
    """main() in this process (each model loads once for the module), its stdout parsed."""
    assert generate.main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def exit_status(argv: list[str]) -> int:
    """main()'s return value, or the status argparse exits with for an argument it cannot parse."""
    try:
        return generate.main(argv)
    except SystemExit as exit:
        return exit.code


def full_forward_probs(model, ids: list[int]) -> torch.Tensor:
    """The next-token softmax after `ids`, from one forward pass over all of them (no KV cache)."""
    with torch.inference_mode():
        return torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), dim=-1)


def test_the_json_has_every_step_and_its_raw_top_is_the_softmax_of_that_steps_logits(capsys, bundled):
    """Each step's raw_top is the 10 most likely tokens of a plain softmax of the logits after the prompt and the
    tokens before it (here from a fresh forward pass, not the engine's cached one), and its probability is the
    chosen token's under temperature 0.8."""
    args = ("--model", BUNDLED_MODEL_NAME, "--prompt", "Once upon a time", "--max-new-tokens")
    out = cli_json(capsys, *args, "6", "--temperature", "0.8", "--seed", "3")
    out_greedy = cli_json(capsys, *args, "4")
    assert generate.main(list(args) + ["4"]) == 0 and capsys.readouterr().out.strip() == out_greedy["text"].strip()
    assert set(out) == {"model", "prompt_tokens", "stop_reason", "text", "steps"}
    assert out["model"] == BUNDLED_MODEL_NAME and len(out["steps"]) == 6 and out["stop_reason"] == "max_new_tokens"
    tokenizer, model = bundled.tokenizer, bundled.model
    ids = tokenizer("Once upon a time")["input_ids"]
    assert out["prompt_tokens"] == len(ids)
    for step in out["steps"]:
        assert set(step) == {"token_id", "token", "probability", "raw_top"}
        probs = full_forward_probs(model, ids)
        top = torch.topk(probs, 10)
        assert [pair[0] for pair in step["raw_top"]] == top.indices.tolist()
        assert [pair[1] for pair in step["raw_top"]] == pytest.approx(top.values.tolist(), abs=1e-5)
        tempered = probs ** (1 / 0.8)  # softmax(logits / T) is proportional to softmax(logits) ** (1 / T)
        assert step["probability"] == pytest.approx((tempered / tempered.sum())[step["token_id"]].item(), abs=1e-5)
        assert step["token"] == tokenizer.decode([step["token_id"]])
        ids.append(step["token_id"])
    assert out["text"] == tokenizer.decode([s["token_id"] for s in out["steps"]], skip_special_tokens=True)
    assert [s["probability"] for s in out_greedy["steps"]] == [1.0] * 4  # greedy: the chosen token is all there is


def test_a_model_name_in_another_case_names_the_same_model():
    assert generate.resolve_name(f" {BUNDLED_MODEL_NAME.upper()}") == BUNDLED_MODEL_NAME


def test_an_unknown_model_name_exits_2_listing_the_names():
    """Through `python -m`, as a user runs it: one line on stderr naming every model."""
    args = [sys.executable, "-m", "inference.generate", "--model", "gpt-9", "--prompt", "Hi", "--max-new-tokens", "3"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(args, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: unknown model 'gpt-9'")
    assert all(name in last for name in [real_model.REAL_MODEL_NAME, BUNDLED_MODEL_NAME, "storyteller-moe-16m"])


@pytest.mark.parametrize(("args", "message"), [
    (("--temperature", "-1"), "temperature"), (("--top-p", "1.5"), "top_p"), (("--seed", "-3"), "seed"),
    (("--max-new-tokens", "0"), "--max-new-tokens has to be at least 1"), (("--prompt", "  "), "the prompt is empty"),
    (("--temperature", "warm"), "invalid float value")])  # fmt: skip
def test_a_bad_setting_exits_2_with_one_line(capsys, args, message):
    base = {"--model": BUNDLED_MODEL_NAME, "--prompt": "Once", "--max-new-tokens": "3"}
    argv = [item for key, value in base.items() if key not in args for item in (key, value)] + list(args)
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
