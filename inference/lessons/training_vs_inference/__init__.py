"""Training vs inference: inference leaves the weights fixed; a training step on a per-session copy moves them,
and what each costs (time, FLOPs, memory), once vs on every request."""
