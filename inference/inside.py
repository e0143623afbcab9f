"""`python -m inference.inside --model DIR_OR_ID --prompt TEXT [--json]`: runs `inference.lessons.inside.cli`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("inference.lessons.inside.cli", run_name="__main__", alter_sys=True)
