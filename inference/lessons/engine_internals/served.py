"""The model the engine serves for this lesson and its shape, known without building or converting anything (every
rerun of the page reads it): the bundled model (trained, so its distributions mean something), and the memory-bound
one of `serving.models` (the real SmolLM2-135M-Instruct, else the random-weights copy of its shape)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inference.core import model_config, real_model
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.lessons.serving import models
from inference.lessons.serving.roofline import ServedModel

BUNDLED, REAL = models.BUNDLED, models.REAL
MEMORY_BOUND = REAL if real_model.is_available() else models.RANDOM
FALLBACK_NOTE = (
    f"{REAL} is not installed here (`{real_model.INSTALL_HINT}`), so the memory-bound model is a random-weights "
    f"copy of its shape: its timing is real, its text is nonsense."
)
REAL_CONTEXT = 8192  # SmolLM2's positions (llama-server gives each slot the model's whole context)


@dataclass(frozen=True)
class EngineModel:
    key: str
    label: str
    name: str  # the model's name, for a sentence
    layers: int
    kv_width: int  # KV heads x head dim: one key row (and one value row) per layer per token
    context: int  # positions in one llama-server slot
    vocab: int
    arithmetic: ServedModel  # weights multiplied per token etc., for FLOPs
    timing_only: bool


def engine_model(key: str = BUNDLED) -> EngineModel:
    if key in (BUNDLED, REAL):
        folder = BUNDLED_MODEL_DIR if key == BUNDLED else real_model.real_model_folder()
        config = json.loads((folder / "config.json").read_text())
        arithmetic = ServedModel.from_safetensors(folder / "model.safetensors")
        name = BUNDLED_MODEL_NAME if key == BUNDLED else REAL
    else:
        config = models.random_config().to_dict()
        shapes = {n: tuple(p.shape) for n, p in models.skeleton(models.random_config()).named_parameters()}
        arithmetic, name = ServedModel.from_shapes(shapes), f"{key} with random weights"
    shape = model_config.from_config(config)
    context = {BUNDLED: shape.context, REAL: min(shape.context, REAL_CONTEXT)}.get(key, models.CONTEXT)
    kv_width = shape.kv_heads * shape.head_dim
    label, random = models.LABELS[key], key == models.RANDOM
    return EngineModel(key, label, name, shape.layers, kv_width, context, shape.vocab_size, arithmetic, random)


def gguf(key: str = BUNDLED) -> Path:
    """The float32 GGUF the engine serves (converted, or built and converted, once and cached)."""
    return models.model_on_engine(key).gguf
