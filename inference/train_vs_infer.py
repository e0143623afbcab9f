"""Training vs inference from a terminal: inference leaves every weight bit for bit equal, training steps on a copy
move them; what a forward pass and a training step cost (wall clock, medians; FLOPs and bytes exact).

    python -m inference.train_vs_infer --json                       # the bundled storyteller, 3 steps
    python -m inference.train_vs_infer --model SmolLM2-135M-Instruct --steps 1 --text "The capital of France is Paris"
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from inference.core.limits import Limits
from inference.core.loader import ModelLoadError, encode_prompt, load_model
from inference.core.tokens import token_text
from inference.lessons.cost.experiments import measure_answer
from inference.lessons.training_vs_inference import cost as costs
from inference.lessons.training_vs_inference import text
from inference.lessons.training_vs_inference import weights as w

REQUEST_PROMPT, REQUEST_REPLY = 100, 100  # the request "once vs every request" prices


def compare(
    model_source: str = "", steps: int = 3, sentence: str = text.DEFAULT_SENTENCE, repeats: int = costs.REPEATS
):
    loaded = load_model(model_source)
    model, tokenizer = loaded.model, loaded.tokenizer
    ids = encode_prompt(tokenizer, sentence)
    before = w.next_token_distribution(model, tokenizer, ids)
    check = w.run_inference_many(model, tokenizer, ids)
    result = w.train_and_compare(w.TrainingCopy.of(model), tokenizer, ids, steps)
    cost = costs.measure_step_cost(model, tokenizer, ids, repeats)
    out = {
        "model": loaded.info.name,
        "parameters": loaded.info.parameters,
        "text": sentence,
        "tokens": len(ids),
        "target_token": token_text(tokenizer, ids[-1]),
        "fingerprint_before": check.fingerprint_before,
        "fingerprint_after_inference": check.fingerprint_after,
        "fingerprint_after_training": result.fingerprint_after,
        "fingerprint_of_the_loaded_model_at_the_end": w.fingerprint(model),
        "inference_passes": check.passes,
        "weights_changed_by_inference": check.changed,
        "training_steps": steps,
        "weights_changed_by_training": result.fingerprint_after != check.fingerprint_before,
        "loss_before": result.losses[0],
        "loss_after": result.losses[-1],
        "training_step_ms_each": result.step_ms,
        "bytes_changed_by_training": result.bytes_changed,
        "weight_bytes": result.bytes_total,
        "target_probability_before": before.target_probability,
        "target_probability_after": result.after.target_probability,
        "top5_before": before.top(tokenizer),
        "top5_after": result.after.top(tokenizer),
        "timed_tokens": cost.tokens,
        "forward_ms": cost.forward.median_ms,
        "forward_ms_all": list(cost.forward.times_ms),
        "train_step_ms": cost.train_step.median_ms,
        "train_step_ms_all": list(cost.train_step.times_ms),
        "flops_forward_per_token": cost.flops_forward_per_token,
        "flops_train_per_token": cost.flops_train_per_token,
        "inference_memory_bytes": cost.memory.inference,
        "training_memory_bytes": cost.memory.training,
        "memory_bytes": vars(cost.memory),
        "torch_threads": torch.get_num_threads(),
    }
    if loaded.info.source == "bundled":  # its own training bill is known: once vs every request
        bill = costs.bundled_training_bill()
        request = measure_answer(model, tokenizer, REQUEST_PROMPT, REQUEST_REPLY)
        out["once_vs_every_request"] = {
            "training_tokens": bill.tokens,
            "training_steps": bill.steps,
            "training_seconds": bill.seconds,
            "training_cores": bill.cores,
            "request_prompt_tokens": REQUEST_PROMPT,
            "request_reply_tokens": request.reply_tokens,
            "request_ms": request.total_ms,
            "requests_to_match_training_time": costs.requests_to_match_by_time(
                bill, request.total_ms, torch.get_num_threads()
            ),
            "requests_to_match_training_flops": costs.requests_to_match_by_flops(
                bill.tokens, REQUEST_PROMPT + REQUEST_REPLY
            ),
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="", help="a model name, folder or hub id (default: the bundled storyteller)")
    parser.add_argument("--steps", type=int, default=3, help="training steps on the text (default 3)")
    parser.add_argument("--text", default=text.DEFAULT_SENTENCE, help="the sentence to run and train on")
    parser.add_argument("--repeats", type=int, default=costs.REPEATS, help="timed passes and steps each")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats have to be at least 1")
    torch.set_num_threads(Limits.from_env().torch_threads)  # as the app runs
    try:
        out = compare(args.model, args.steps, args.text, args.repeats)
    except (ModelLoadError, ValueError) as err:
        print(err, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print("\n".join(f"{name}: {value}" for name, value in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
