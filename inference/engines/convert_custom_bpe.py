"""Run llama.cpp's unmodified `convert_hf_to_gguf.py` on a vocabulary trained here, naming its BPE pre-tokenizer:

    LLAMA_CPP=<vendored llama.cpp> python convert_custom_bpe.py <hf folder> [converter arguments]

The converter names a pre-tokenizer by hashing the ids it gives for a fixed text, looked up among published
tokenizers; a vocabulary trained here matches none ("BPE pre-tokenizer was not recognized"), and its hash changes with
every retraining. Ours pre-tokenizes with `ByteLevel(use_regex=true)`, GPT-2's regex: "gpt-2"; anything else is refused.
A subprocess, so the converter's imports never enter the app.
"""

import json
import os
import runpy
import sys


def gpt2_pre_tokenizer(self, tokenizer) -> str:
    with open(self.dir_model / "tokenizer.json", encoding="utf-8") as f:
        pre = json.load(f).get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        raise SystemExit(f"The tokenizer's pre-tokenizer is {pre!r}, not GPT-2's ByteLevel regex: cannot name it.")
    return "gpt-2"


def main() -> None:
    llama_cpp = os.environ["LLAMA_CPP"]
    sys.path[:0] = [llama_cpp, os.path.join(llama_cpp, "gguf-py")]  # the converter's own gguf-py, same version
    from conversion.base import TextModel  # this llama.cpp keeps the model classes in conversion/

    TextModel.get_vocab_base_pre = gpt2_pre_tokenizer
    sys.argv[0] = os.path.join(llama_cpp, "convert_hf_to_gguf.py")
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
