"""Inference Lab's engine room: plain Python, no Streamlit anywhere under this package.

- `core`: what every lesson stands on: loading models (`loader`, `bundled`), their shapes (`model_config`),
  a generation run and its forward pass (`run`: `Trace`, `StepRecord`; `forward`, the one boundary: transformers'
  forward locally, `remote` for a model a serving engine runs), the KV cache, tokens, prompts, limits, paths,
  machine facts, measuring helpers, FLOPs, MoE routing records, quantized copies, the public-model calculator and
  `real_model` (SmolLM2-135M-Instruct from its PyPI wheel).
- `sampling`: the stages in one table (`stages`), the settings, display order and draw (`pipeline`), and the step
  views the charts read.
- `generate`: one run from the command line (`python -m inference.generate`); `bench`: every benchmark.
- `engines`: serving engines over HTTP (`client`: llama.cpp and vLLM dialects) and llama.cpp's build/convert/serve.
- `training`: the bundled models' trainer, corpus split, evaluation and model cards.
- `lessons`: one folder per page, each with its computation, sentences and figures: start, generate,
  sampling_lab, compare, prefill_decode, kv_cache, quantization, moe, cost, speculative, serving.

Rule (tests/test_layout_rule.py): lessons import core, sampling and engines; core, sampling, engines and
training never import a lesson; no import circle.
"""
