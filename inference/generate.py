"""Generate from the command line with the app's own step engine, and see every step's probabilities.

    python -m inference.generate --model SmolLM2-135M-Instruct --chat --prompt "What is the capital of France?" \\
        --max-new-tokens 20 --json

`--model` is a name the sidebar shows, in any case. The run is a `Trace` with `SamplingSettings`, as on Generate
(temperature 0, the default, is greedy; a seed fixes every draw). It prints the text, or with `--json`:
    {"model", "prompt_tokens", "stop_reason", "text", "steps": [{"token_id", "token", "probability", "raw_top"}]}
`probability`: the chosen token's in the distribution it was drawn from; `raw_top`: the step's 10 most likely
[token_id, probability] under the plain softmax. A wrong name or setting exits 2, a model that cannot load 1.
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


class UsageError(ValueError):
    """A name or setting the command cannot run with (exit status 2)."""


@functools.lru_cache(maxsize=2)  # a test or a script running several prompts loads each model once
def load(name: str):
    sources = {REAL_MODEL_NAME: REAL_MODEL_NAME} | {model.name: model.source for model in bundled_models()}
    return load_model(sources[name])


def resolve_name(name: str) -> str:
    """The sidebar's spelling of `name`, matched in any case; UsageError listing the names otherwise."""
    names = [REAL_MODEL_NAME] + [model.name for model in bundled_models()]
    by_lower = {known.lower(): known for known in names}
    if name.strip().lower() not in by_lower:
        raise UsageError(f"unknown model {name!r}; the models are: {', '.join(names)}")
    return by_lower[name.strip().lower()]


def raw_top(logits, k: int = 10) -> list[list]:
    values, ids = torch.topk(torch.softmax(logits.float(), dim=-1), k)
    return [[int(i), float(p)] for i, p in zip(ids.tolist(), values.tolist())]


def run(loaded, prompt: str, settings: SamplingSettings, max_new_tokens: int, seed: int = 0, chat: bool = False):
    """A finished `Trace` for this prompt (in the chat template when `chat`)."""
    ids = encode_prompt(loaded.tokenizer, prompt, chat)
    trace = new_trace(loaded.model, loaded.tokenizer, ids, max_new_tokens, seed=seed)
    list(trace.run(settings))
    return trace


def trace_json(trace, tokenizer, model_name: str) -> dict:
    steps = [
        {"token_id": r.token_id, "token": r.token_text, "probability": float(r.prob), "raw_top": raw_top(r.logits)}
        for r in trace.records
    ]
    text = tokenizer.decode(trace.generated_ids, skip_special_tokens=True)
    meta = {"model": model_name, "prompt_tokens": len(trace.prompt_ids), "stop_reason": trace.stop_reason}
    return meta | {"text": text, "steps": steps}


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
        name, settings = resolve_name(args.model), checked_settings(args)
        loaded = load(name)
    except UsageError as err:
        return fail(err, 2)
    except (RealModelError, ModelLoadError) as err:
        return fail(err, 1)
    try:
        trace = run(loaded, args.prompt, settings, args.max_new_tokens, args.seed, args.chat)
    except (ModelLoadError, ValueError) as err:  # no chat template; a prompt longer than the context
        return fail(err, 2)
    result = trace_json(trace, loaded.tokenizer, name)
    print(json.dumps(result, ensure_ascii=False) if args.json else result["text"])
    return 0


def fail(err: Exception, status: int) -> int:
    print(f"error: {err}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
