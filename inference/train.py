"""`python -m inference.train` (cited by the model cards and README): runs `inference.training.train`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.training.train", run_name="__main__", alter_sys=True)
