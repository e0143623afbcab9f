"""KV-cache accounting: what the real cache tensors hold, and what the formula says.

`layer_tensors` is the ONE function that reads transformers' cache internals; when an
upgrade moves them (as `key_cache` became `cache.layers[i].keys`), only it changes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


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
    """The numbers the KV-cache formula needs, from a model config."""

    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_element: int

    @classmethod
    def from_config(cls, config, dtype: torch.dtype) -> "KVShape":
        config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        heads = getattr(config, "num_attention_heads", None) or config.n_head
        layers = getattr(config, "num_hidden_layers", None) or config.n_layer
        hidden = getattr(config, "hidden_size", None) or config.n_embd
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        return cls(layers, kv_heads, head_dim, torch.empty((), dtype=dtype).element_size())

    def bytes_per_token(self) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_element

    def formula_bytes(self, tokens: int, batch: int = 1) -> int:
        return self.bytes_per_token() * tokens * batch
