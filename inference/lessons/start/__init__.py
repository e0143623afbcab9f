"""Start here: the first look (tokens, one distribution, greedy vs a draw, prefill vs decode, KV bytes)."""
