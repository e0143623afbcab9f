"""Real serving engines as backends, driven over their HTTP APIs (nothing here imports Streamlit or vLLM):
`llamacpp` builds llama.cpp's `llama-server`, converts a model to GGUF and serves it; `vllm` installs and serves
vLLM; `lifetime` makes sure a server never outlives its starter; `client` is every HTTP request to an engine, with
one error type. The remote model the pages step through is `inference.core.remote`."""
