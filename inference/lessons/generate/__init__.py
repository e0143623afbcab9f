"""Generate: token chips, the next-token chart and the cumulative curve."""
