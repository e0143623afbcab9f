"""`python -m inference.model_card` (cited by the model cards and README): runs `inference.training.model_card`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.training.model_card", run_name="__main__", alter_sys=True)
