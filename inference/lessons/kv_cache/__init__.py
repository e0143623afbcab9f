"""KV cache: bytes from the real tensors vs the formula, with vs without the cache (experiments), figures."""
