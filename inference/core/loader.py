"""The one model loader: the bundled model, SmolLM2, a hub id or a folder. For every source: safetensors only
(pickles can run code), never `trust_remote_code`, causal LMs only, a size check before any weights are read, and
every failure a `ModelLoadError` a person can act on."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

from inference.core import model_config, real_model
from inference.core.limits import Limits
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
CAUSAL_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# Weight files the hub download may fetch: never pickles, never code.
HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt", "*.tiktoken"]


class ModelLoadError(Exception):
    """A model could not be loaded; the message says why and what to do."""


@dataclass(frozen=True)
class ModelInfo:
    name: str
    source: str  # "bundled", "real", "hub" or "folder"
    architecture: str
    parameters: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    context: int
    vocab_size: int
    weight_bytes: int
    dtype: str
    has_chat_template: bool


@dataclass(frozen=True)
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    info: ModelInfo


def classify_source(source: str | None) -> str:
    """'bundled', 'real' (SmolLM2 by name, any case), 'folder' or 'hub' for what a user typed."""
    text = (source or "").strip()
    if text in ("", BUNDLED_MODEL_NAME, "bundled"):
        return "bundled"
    if text.lower() == real_model.REAL_MODEL_NAME.lower():
        return "real"
    if text.startswith(("/", "./", "../", "~")) or Path(text).expanduser().exists():
        return "folder"
    return "hub"


def check_folder(folder: Path) -> None:
    if not folder.exists():
        raise ModelLoadError(f"Folder not found: {folder}")
    if not folder.is_dir():
        raise ModelLoadError(f"Not a folder: {folder}")
    config_file = folder / "config.json"
    if not config_file.exists():
        raise ModelLoadError(f"{folder} has no config.json, so it is not a Hugging Face model folder.")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"{config_file} is not valid JSON: {err}") from None
    if "auto_map" in config or any(folder.glob("*.py")):
        raise ModelLoadError(
            "This model needs its own Python code (custom architecture). Inference Lab never runs code "
            "that comes with a model (no trust_remote_code), so it cannot load it."
        )
    architectures = config.get("architectures") or []
    if config.get("is_encoder_decoder") or (
        architectures and not any(a.endswith(CAUSAL_ARCH_SUFFIXES) for a in architectures)
    ):
        raise ModelLoadError(
            f"This is not a causal (next-token) language model: its architecture is {', '.join(architectures) or 'encoder-decoder'}. "
            "Inference Lab needs a decoder-only model such as GPT-2, Llama, Qwen or SmolLM."
        )
    has_safetensors = any(folder.glob("*.safetensors"))
    if not has_safetensors:
        if any(p.suffix in PICKLE_SUFFIXES for p in folder.iterdir()):
            raise ModelLoadError(
                "This folder has only pickle weights (.bin/.pt). Loading a pickle can run arbitrary code, "
                "so Inference Lab loads safetensors only. Convert the weights to safetensors first."
            )
        raise ModelLoadError(f"{folder} has no model weights (no .safetensors file).")


def check_memory(folder: Path, dtype: str, max_model_bytes: int) -> None:
    """Refuse before loading weights that cannot fit (a 16-bit file loaded as float32 doubles)."""
    config = json.loads((folder / "config.json").read_text())
    stored_bits = 32 if "32" in str(config.get("torch_dtype") or config.get("dtype") or "float32") else 16
    file_bytes = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    needed = file_bytes * (32 // stored_bits if dtype == "float32" else 1)
    available = psutil.virtual_memory().available
    if needed > max_model_bytes:
        raise ModelLoadError(
            f"This model needs about {needed / 1e9:.1f} GB of memory as {dtype}; this server allows "
            f"{max_model_bytes / 1e9:.1f} GB per model (INFERENCE_LAB_MAX_MODEL_BYTES). Pick a smaller model."
        )
    if needed > 0.8 * available:
        raise ModelLoadError(
            f"This model needs about {needed / 1e9:.1f} GB of memory as {dtype}, but only "
            f"{available / 1e9:.1f} GB is free. Pick a smaller model or bfloat16."
        )


def download_from_hub(repo_id: str, max_model_bytes: int) -> Path:
    """The hub snapshot's folder (safetensors and tokenizer files, size checked first); the cache when offline."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    if not HUB_ID.match(repo_id):
        raise ModelLoadError(
            f"'{repo_id}' is not a hub id (like gpt2 or HuggingFaceTB/SmolLM2-135M) nor an existing folder."
        )
    try:
        try:
            info = HfApi().model_info(repo_id, files_metadata=True)
            weights = [s for s in info.siblings if s.rfilename.endswith(".safetensors")]
            if not weights and any(s.rfilename.endswith(PICKLE_SUFFIXES) for s in info.siblings):
                raise ModelLoadError(f"{repo_id} has only pickle weights; Inference Lab loads safetensors only.")
            total = sum(s.size or 0 for s in weights)
            if total > max_model_bytes:
                raise ModelLoadError(
                    f"{repo_id} has {total / 1e9:.1f} GB of weights; this server allows {max_model_bytes / 1e9:.1f} GB."
                )
            return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
        except (RepositoryNotFoundError, GatedRepoError, HFValidationError, ModelLoadError):
            raise
        except Exception:  # offline or unreachable: fall back to what is cached
            return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS, local_files_only=True))
    except RepositoryNotFoundError:
        raise ModelLoadError(
            f"No model '{repo_id}' on the Hugging Face hub (or it is private). Check the spelling."
        ) from None
    except GatedRepoError:
        raise ModelLoadError(f"'{repo_id}' is gated: accept its licence on the hub and log in first.") from None
    except HFValidationError as err:
        raise ModelLoadError(f"'{repo_id}' is not a valid hub id: {err}") from None
    except LocalEntryNotFoundError:
        raise ModelLoadError(
            f"Cannot reach the Hugging Face hub, and '{repo_id}' is not in the local cache. "
            "Connect to the internet once to download it, or use the bundled model."
        ) from None


def describe(model, tokenizer, name: str, source: str, dtype: str) -> ModelInfo:
    shape, params = model_config.from_config(model.config), list(model.parameters())  # tied weights appear once
    return ModelInfo(
        name, source, type(model).__name__, sum(p.numel() for p in params), shape.layers, shape.attention_heads,
        shape.kv_heads, shape.head_dim, shape.context, model.get_output_embeddings().weight.shape[0],
        sum(p.numel() * p.element_size() for p in params), dtype, bool(getattr(tokenizer, "chat_template", None)),
    )  # fmt: skip


def load_model(
    source: str | None = None, dtype: str = "float32", limits=None, server_is_public: bool = False
) -> LoadedModel:
    """A model and tokenizer in eval mode from `source` (empty: the bundled model), or a ModelLoadError."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    limits = limits or Limits.from_env()
    if dtype not in DTYPES:
        raise ModelLoadError(f"Unknown precision '{dtype}'; choose one of {', '.join(DTYPES)}.")
    kind = classify_source(source)
    if kind == "bundled":
        folder, name = BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
    elif kind == "real":  # the project's own cache folder: no folder rule applies
        try:
            folder = real_model.real_model_folder()
        except real_model.RealModelError as err:
            raise ModelLoadError(str(err)) from None
        name = real_model.REAL_MODEL_NAME
    elif kind == "folder":
        folder, name = Path(source.strip()).expanduser(), Path(source.strip()).name
        if not limits.folder_allowed(folder, server_is_public):
            raise ModelLoadError(
                "Loading models from folders is limited on this server to "
                f"{limits.models_folder} (INFERENCE_LAB_MODELS_FOLDER)."
            )
    else:
        if not limits.allow_hub:
            raise ModelLoadError("This server does not allow hub models (INFERENCE_LAB_ALLOW_HUB=0).")
        name = source.strip()
        folder = download_from_hub(name, limits.max_model_bytes)
    check_folder(folder)
    check_memory(folder, dtype, limits.max_model_bytes)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=DTYPES[dtype], use_safetensors=True, trust_remote_code=False
        )
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"Could not load the model from {folder}: {str(err).splitlines()[0]}") from None
    except MemoryError:
        raise ModelLoadError("The server ran out of memory loading this model. Pick a smaller model.") from None
    model.eval()
    model.requires_grad_(False)
    return LoadedModel(model=model, tokenizer=tokenizer, info=describe(model, tokenizer, name, kind, dtype))


def chat_prompt(tokenizer, text: str) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError("This model has no chat template, so chat mode is not available for it.")
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )


def encode_prompt(tokenizer, text: str, chat: bool = False) -> list[int]:
    if chat:
        return tokenizer(chat_prompt(tokenizer, text), add_special_tokens=False)["input_ids"]
    return tokenizer(text)["input_ids"]
