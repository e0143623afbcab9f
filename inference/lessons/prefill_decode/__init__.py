"""Prefill vs decode: the measured timeline and prompt sweep (timing, engine_timing) and figures."""
