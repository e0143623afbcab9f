"""Same luck, two settings: shared-u runs (shared_draws) and their figures."""
