"""`python -m inference.constrained --prompt TEXT (--json-schema FILE | --regex RE | --choices A,B,...)
[--max-new-tokens N] [--temperature T] [--seed S] [--json]`

Generates on the bundled model under the format, greedy unless --temperature says otherwise. With
--json it prints `text` (the generated text alone), `steps` (per token: `token_id`, `allowed`
count, `allowed_mass` before the mask, `mask_us`), `logprob` and `logprob_unconstrained` (the
model's own continuation, same prompt and settings, mask off, as many tokens), plus
`unconstrained_text`, `valid`, `stop_reason` and `error` (one sentence, or null).
Exit code 2 when the format cannot be used or the run could not be finished.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.lessons.constrained.formats import CHOICES, JSON_SCHEMA, REGEX, Format, FormatError
from inference.lessons.constrained.run import ConstrainedRun, unconstrained_twin
from inference.sampling.pipeline import SamplingSettings


def parse_format(args) -> Format:
    if args.json_schema is not None:
        try:
            return Format(JSON_SCHEMA, Path(args.json_schema).read_text(encoding="utf-8"))
        except OSError as error:
            raise FormatError(f"The schema file cannot be read: {error.strerror}.") from None
    if args.regex is not None:
        return Format(REGEX, args.regex)
    return Format(CHOICES, "\n".join(c.strip() for c in args.choices.split(",")))


def outcome(model, tokenizer, prompt_ids, fmt: Format, settings: SamplingSettings, max_new: int, seed: int) -> dict:
    run = ConstrainedRun(model, tokenizer, prompt_ids, fmt, max_new, seed=seed)
    try:
        run.run(settings)
        error = run.unfinished_sentence()
    except FormatError as stopped:
        error = str(stopped)
    plain = unconstrained_twin(run, settings)
    return {
        "text": run.text,
        "steps": [
            dict(token_id=s.token_id, allowed=s.allowed, allowed_mass=s.allowed_mass, mask_us=round(s.mask_us, 1))
            for s in run.steps
        ],  # fmt: skip
        "logprob": run.logprob(),
        "logprob_unconstrained": plain.logprob(),
        "unconstrained_text": plain.text,
        "valid": fmt.matches(run.text),
        "stop_reason": run.trace.stop_reason,
        "error": error,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", required=True)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--json-schema", metavar="FILE", help="a JSON schema file")
    which.add_argument("--regex", metavar="RE", help="the whole text has to match it")
    which.add_argument("--choices", metavar="A,B,...", help="the text is one of these")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (the default) is greedy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="model source (default: the bundled model)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    limit = Limits.from_env().max_new_tokens
    if not 1 <= args.max_new_tokens <= limit:
        parser.error(f"--max-new-tokens has to be from 1 to {limit}, but is {args.max_new_tokens}")
    try:
        fmt = parse_format(args)
        loaded = load_model(args.model)
        prompt_ids = encode_prompt(loaded.tokenizer, args.prompt)
        settings = SamplingSettings(temperature=args.temperature)
        result = outcome(loaded.model, loaded.tokenizer, prompt_ids, fmt, settings, args.max_new_tokens, args.seed)
    except (FormatError, ValueError) as error:
        print(json.dumps({"error": str(error)}) if args.json else f"error: {error}")
        return 2
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result["text"])
        print(
            f"# {len(result['steps'])} tokens, log p {result['logprob']:.2f} "
            f"(unconstrained {result['logprob_unconstrained']:.2f}), valid: {result['valid']}",
            file=sys.stderr,
        )
        if result["error"]:
            print(f"# {result['error']}", file=sys.stderr)
    return 2 if result["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
