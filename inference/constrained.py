"""`python -m inference.constrained` (the issue's command): runs `inference.lessons.constrained.cli`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.lessons.constrained.cli", run_name="__main__", alter_sys=True)
