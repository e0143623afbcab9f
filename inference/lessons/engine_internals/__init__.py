"""Inside the serving engine: the prefix cache, chunked prefill and its stalls, KV-cache precision (llama-server)."""
