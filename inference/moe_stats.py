"""`python -m inference.moe_stats` (cited by the model cards and README): runs `inference.training.moe_stats`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.training.moe_stats", run_name="__main__", alter_sys=True)
