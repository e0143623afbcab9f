"""Run llama.cpp's unmodified `convert_hf_to_gguf.py`, naming the BPE pre-tokenizer of a vocabulary trained
here. Usage (a subprocess, so the converter's imports never enter the app):

    LLAMA_CPP=<vendored llama.cpp> python convert_custom_bpe.py <hf folder> [converter arguments]

Why: the converter names a BPE tokenizer's pre-tokenizer (the regex that splits text before merging) by
hashing the ids it gives for a fixed text and looking the hash up in a table of published tokenizers. A
vocabulary trained here matches no published hash, so conversion stops with "BPE pre-tokenizer was not
recognized". The hash cannot be added once and for all: it changes with every retrained vocabulary. Our
tokenizer.json pre-tokenizes with `ByteLevel(use_regex=true)`, which is GPT-2's split regex, so "gpt-2" is
the right name; anything else is refused rather than guessed.
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
