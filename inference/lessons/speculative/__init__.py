"""Speculative decoding: the run (run), its timing and sweep (timing), figures."""
