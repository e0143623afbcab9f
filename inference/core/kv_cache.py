"""KV-cache accounting: what the real cache tensors hold, and what the formula says.

`layer_tensors` is the ONE function that reads transformers' cache internals; when an
upgrade moves them (as `key_cache` became `cache.layers[i].keys`), only it changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from inference.core import model_config


def new_cache(config) -> DynamicCache:
    """An empty KV cache for one run of a model with this `config`: the ONE place a cache is made, so every run,
    measurement and lesson holds the same kind that `layer_tensors` reads."""
    return DynamicCache(config=config)


def layer_tensors(cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer, each [batch, kv_heads, tokens, head_dim]."""
    out = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None or keys.numel() == 0:
            continue
        out.append((keys, values))
    return out


def cache_length(cache) -> int:
    tensors = layer_tensors(cache)
    return 0 if not tensors else int(tensors[0][0].shape[-2])


def measured_bytes_per_layer(cache) -> list[int]:
    """Bytes the key and value tensors of each layer occupy, read from the tensors."""
    return [k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layer_tensors(cache)]


def measured_bytes(cache) -> int:
    return sum(measured_bytes_per_layer(cache))


@dataclass(frozen=True)
class KVShape:
    """A model's shape (read by `inference.core.model_config`) with the cache's bytes per number: what the
    KV formula needs. The formula itself is `model_config.kv_cache_bytes`, the one in the project."""

    shape: model_config.ModelShape
    bytes_per_element: int

    @classmethod
    def from_config(cls, config, dtype: torch.dtype) -> KVShape:
        return cls(model_config.from_config(config), torch.empty((), dtype=dtype).element_size())

    @property
    def layers(self) -> int:
        return self.shape.layers

    @property
    def kv_heads(self) -> int:
        return self.shape.kv_heads

    @property
    def head_dim(self) -> int:
        return self.shape.head_dim

    def bytes_per_token(self) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element (below every sliding window)."""
        return model_config.kv_bytes_per_token(self.shape, self.bytes_per_element)

    def formula_bytes(self, tokens: int, batch: int = 1) -> int:
        return model_config.kv_cache_bytes(self.shape, tokens, batch, self.bytes_per_element)
