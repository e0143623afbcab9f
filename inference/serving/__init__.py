"""Serving many requests at once, measured on a real engine (llama.cpp's `llama-server`, or vLLM).

- `trace`: a seeded Poisson arrival trace (when each request arrives, how long its prompt and reply are).
- `stats`: what a replayed trace measured, per request (TTFT, time per output token, end to end) and
  overall (percentiles, throughput, goodput under an SLO), computed from recorded timestamps.
- `replay`: send a trace to an engine with streaming and record when every token arrived.
- `engine_state`: the engine's own view while the trace runs (running and waiting requests, KV cache).
- `random_model`: a model with a public model's layers and widths and random weights, for timing only.
- `roofline`: what the machine's bandwidth and peak FLOP/s predict for prefill and batched decode.
- `experiments`: one at a time vs batched, and the throughput-latency sweep.
- `students`: how many students at a human pace one server takes within a p95 Step latency (in-process vs engine).

Nothing here imports Streamlit.
"""
