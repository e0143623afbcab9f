"""Real serving engines as backends: llama.cpp's `llama-server` (built here) and vLLM, driven over
their OpenAI-compatible HTTP APIs. Nothing here imports Streamlit or vLLM.

- `llamacpp`: build `llama-server` from a pinned sdist, convert a model to GGUF, serve it on loopback.
- `client`: one httpx client with the llama.cpp and vLLM dialects; every failure is an `EngineError`.
- `remote`: a remote model the pages treat like a `LoadedModel`, and the remote Step.
- `timing`: prefill/decode timeline and sweep from a server's own timings; `gguf_compare`: GGUF rows for the
  Quantization page. Their benchmark keys live with every other one in `inference.bench`.
"""
