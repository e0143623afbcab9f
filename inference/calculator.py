"""`python -m inference.calculator` (cited by the model cards and README): runs `inference.core.calculator`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.core.calculator", run_name="__main__", alter_sys=True)
