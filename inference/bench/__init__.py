"""Every benchmark in one place: `python -m inference.bench [--json PATH] [--model SOURCE]` (see `cli.py`).

One module per area, each returning its keys as a dict:
- `engine`: the app's step engine (transformers' forward behind `Trace`, every distribution recorded) against
  `model.generate`; prefill and decode per token; the sampling views.
- `inside`: the Inside page's computation for a 300-token context.
- `constrained`: the mask's cost on the JSON-schema preset.
- `classroom`: how soon 30 class followers see a Step, and what their polling costs.
- `llamacpp`: llama-server against the step engine, and one remote Step.
- `serving`, `engine_internals`: llama-server replays (1 slot vs 8) and the inside-the-engine figures (minutes).
- `pages`: the Streamlit server's CPU per Step in real Chromium (`--pages`).
- `students`: the class load driver (`python -m inference.bench.students`), not part of the whole run.

The speculative keys come from `inference.bench.real_spec.bundled_benchmark`, the quantization rows
from `inference.lessons.quantization.experiments.benchmark_rows`, the closed-loop serving capacity from
`inference.lessons.serving.capacity`. Figures are reported, never asserted in tests; the latest whole run per
CPU kind is in docs/BENCHMARKS.md.
"""
