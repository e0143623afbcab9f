"""Cost: input vs output token time (experiments), decode batches (batching), figures."""
