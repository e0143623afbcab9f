"""Benchmark: `python -m inference.bench [--json PATH] [--model SOURCE]`. Every key is measured on this machine and
reported, never asserted in tests. The step engine's keys (`engine_*`, `ttft_ms`, views, `inside_*`, `real_*`) are
engine.py's; the speculative keys are timed on the app's torch threads (`spec_torch_threads`), the rest on torch's
default; llama-server's (`llamacpp_*`, `serving_*`, the engine internals) when it is built or running; `--pages`:
the Streamlit server's CPU per Step and Generate on SmolLM2, driven by Chromium (minutes).
"""

from __future__ import annotations

import argparse
import json

import pandas as pd
import torch
import transformers

from inference.bench import classroom, engine, engine_internals, pages, real_gguf, real_spec, serving
from inference.core import real_model
from inference.core.loader import encode_prompt, load_model
from inference.core.machine import cpu_name, logical_cpus
from inference.lessons.quantization.experiments import benchmark_rows
from inference.lessons.serving import capacity as serving_capacity  # closed loop, 1 slot vs 8, and the roofline


def run(model_source: str | None = None, include_quantization: bool = True, include_serving: bool = True) -> dict:
    loaded = load_model(model_source)
    model, tokenizer = loaded.model, loaded.tokenizer
    prompt_ids = encode_prompt(tokenizer, engine.BENCH_PROMPT)
    results = {"model": loaded.info.name, "torch_threads": torch.get_num_threads()}
    results |= {"transformers_version": transformers.__version__, "torch_version": torch.__version__}
    results |= {"cpu": cpu_name(), "logical_cpus": logical_cpus()}
    results.update(engine.engine_vs_generate(model, tokenizer))
    results.update(engine.prefill_and_decode(model, tokenizer))
    results["view_ms_vocab_4k"] = engine.view_ms(4096)
    results["view_ms_vocab_50k"] = engine.view_ms(50257)
    results["trace_view_ms_200"] = engine.trace_view_ms(model, tokenizer)
    results.update(engine.inside_figures(model, tokenizer))
    lookup_ids = encode_prompt(tokenizer, engine.LOOKUP_PROMPT)
    results.update(real_spec.bundled_benchmark(model, tokenizer, prompt_ids, lookup_prompt_ids=lookup_ids))
    results.update(engine.engine_figures(model, tokenizer, prompt_ids))
    results.update(engine.constrained_figures(model, tokenizer, prompt_ids))
    results.update(classroom.class_figures())
    if include_quantization:
        results["quantization"] = benchmark_rows(model, tokenizer, prompt_ids)
    if include_serving:  # llama-server replays of one trace, 1 slot vs 8 (minutes; see serving.py)
        results.update(serving.run())
        results.update(engine_internals.run())
        results.update(serving_capacity.benchmark())
    # SmolLM2-135M-Instruct, the real pretrained model: after the roofline, whose bandwidth sets its decode limit
    results.update(engine.real_figures(bandwidth_gbs=results.get("roofline_bandwidth_gbs")))
    results.update(real_spec.real_spec_figures())  # prompt lookup on a copying request, and the self-draft
    if include_serving:
        # llama-server's decode rate per GGUF type of SmolLM2, beside transformers' and the roofline's bandwidth limit
        results.update(real_gguf.real_gguf_figures(bandwidth_gbs=results.get("roofline_bandwidth_gbs")))
    return results


GOALS = {
    "engine_vs_generate": "the same forward as generate: near 1 (the run's records and views cost the rest)",
    "view_ms_vocab_4k": "goal <= 5",
    "view_ms_vocab_50k": "goal <= 5",
    "trace_view_ms_200": "goal <= 100",
    "inside_ms_300": "goal <= 200",
    "page_step_server_cpu_ms": "goal <= 20",
    "page_step_server_cpu_ms_300": "goal <= 30",
    "page_step_floor_server_cpu_ms": "Streamlit's own (buttons, chips, status line)",
    "spec_speedup_vs_plain": "the 6M target's weights sit in the CPU cache: a verify pass costs several passes",
    "spec_speedup_vs_plain_t0.8": "(as above)",
    "spec_prompt_lookup_speedup_vs_plain": "goal >= 1.0 (repetitive prompt)",
    "llamacpp_vs_engine": "the real engine over transformers: where speed comes from",
    "real_spec_speedup_vs_plain": "goal >= 1.5",
    "real_decode_tokens_per_s": "goal >= 10 (in the app)",
    "real_gguf_decode_tokens_per_s": "goal: q8_0 or a 4-bit type >= 1.8x f32",
    "real_decode_rates": "the same model in transformers, on llama-server and at the bandwidth limit",
    "serving_capacity_8_vs_1": "goal >= 2.5",
}


def print_table(results: dict) -> None:
    width = max(len(k) for k in results)
    for key, value in results.items():
        if key == "quantization":
            continue
        print(f"{key:<{width}}  {value!s:<14} {GOALS.get(key, '')}")
    if results.get("quantization"):
        print("\nquantization (the step engine, greedy):")
        print(pd.DataFrame(results["quantization"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m inference.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--model", default=None, help="model source (default: the bundled model)")
    parser.add_argument("--no-quantization", action="store_true")
    parser.add_argument("--no-serving", action="store_true", help="skip the llama-server replays (minutes)")
    parser.add_argument("--pages", action="store_true", help="also the server's CPU per Step in Chromium (minutes)")
    args = parser.parse_args(argv)
    results = run(args.model, include_quantization=not args.no_quantization, include_serving=not args.no_serving)
    if args.pages:  # the app in its own process, driven by Chromium: nothing of Streamlit is imported here
        results.update(pages.page_figures())
        if real_model.is_available():  # Generate on the real model: its first Step, each paint, Play's rate
            results.update(pages.real_page_figures())
    print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
