"""`python -m inference.bench`: the whole benchmark (see inference/bench/cli.py)."""

from inference.bench.cli import main

main()
