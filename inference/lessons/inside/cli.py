"""Inside the forward pass for the next token after a prompt, from the command line.

    python -m inference.inside --model DIR_OR_ID --prompt TEXT [--json]

JSON: `lens` (one entry per layer, 0 = embeddings .. L = last: `layer`, `top_ids`, `top_probs` (top 10),
`chosen_prob` of the model's argmax), `attention` ([layer][head][position] weights of the last position) and
`parts` (`name`, `flops`, `bytes`, `decode_ms`; also `prefill_flops`, `prefill_ms`, `decode_bytes_read`).
Without --json, a short table. Exit code 2 with one sentence for a model or prompt it cannot use.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from inference.core.limits import Limits
from inference.core.loader import ModelLoadError, encode_prompt, load_model
from inference.core.tokens import readable_token
from inference.lessons.glossary import plural
from inference.lessons.inside.forward_pass import UnsupportedModel, look_inside, part_groups


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="", help="a model folder or hub id (default: the bundled model)")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--json", action="store_true", help="print the JSON instead of a table")
    args = parser.parse_args(argv)
    torch.set_num_threads(Limits.from_env().torch_threads)  # as app.py does: the timings are the page's
    try:
        loaded = load_model(args.model)
        ids = encode_prompt(loaded.tokenizer, args.prompt) if args.prompt.strip() else []
        if not ids:
            raise ValueError("The prompt is empty: give a few words for the model to continue.")
        if len(ids) > loaded.info.context:
            raise ValueError(f"The prompt has {len(ids):,} tokens; this model's context holds {loaded.info.context:,}.")
        inside = look_inside(loaded.model, ids)
    except (ModelLoadError, UnsupportedModel, ValueError) as err:
        print(str(err), file=sys.stderr)
        return 2
    if args.json:
        json.dump(inside.to_json(), sys.stdout)
        print()
        return 0
    tokenizer = loaded.tokenizer
    print(f"{loaded.info.name}: {plural(len(ids), 'token')} of context; the next token, layer by layer (logit lens):")
    for entry in inside.to_json()["lens"]:
        tops = ", ".join(
            f"{readable_token(tokenizer, i)!r} {p:.2f}" for i, p in zip(entry["top_ids"][:3], entry["top_probs"])
        )
        print(f"  layer {entry['layer']:>2}: {tops}")
    print("\nWhere the pass goes (decode pass, measured ms; FLOPs and bytes computed exactly):")
    print(part_groups(inside.parts).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
