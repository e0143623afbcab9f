"""The one place that knows transformers' module names: a model's parts by role, and a layer's attention weights.

Supported: Llama, Mistral, Qwen2 and Mixtral (`model.layers[i].self_attn`, `mlp` or `mlp.gate` + `mlp.experts`,
RMSNorm, rotary positions) and GPT-2 (`transformer.h[i].attn`, `mlp`, LayerNorm, learned positions).
"""

from __future__ import annotations

import inspect

import torch

from inference.core import model_config

LLAMA_LAYOUT = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "MixtralForCausalLM")
GPT2_LAYOUT = ("GPT2LMHeadModel",)

# Part kinds, in the order a pass runs them; a layer's part is named "layer i <kind>".
EMBEDDING, POSITIONS, NORMS, ATTENTION, MLP, ROUTER, EXPERTS, OUTPUT = (
    "embedding", "positions and mask", "norms", "attention", "MLP", "router", "experts", "output layer",
)  # fmt: skip


class UnsupportedModel(ValueError):
    """The page does not know this architecture's module names; the message is one sentence."""


class Adapter:
    """What a view needs of a model, by role: its parts, the final norm, the output layer, attention weights."""

    def __init__(self, model):
        name = type(model).__name__
        if getattr(model, "is_remote", False):
            raise UnsupportedModel(
                "A serving engine returns tokens and probabilities, not the hidden states and attention weights "
                "inside its forward pass, so this page needs the model's weights in this process."
            )
        if name not in LLAMA_LAYOUT + GPT2_LAYOUT:
            raise UnsupportedModel(
                f"This page knows the insides of {', '.join(n.removesuffix('ForCausalLM') for n in LLAMA_LAYOUT)} "
                f"and GPT-2 models, not {name}; the rest of the app works with it."
            )
        self.model, self.gpt2 = model, name in GPT2_LAYOUT
        self.body = model.transformer if self.gpt2 else model.model
        self.layers = self.body.h if self.gpt2 else self.body.layers
        self.final_norm = self.body.ln_f if self.gpt2 else self.body.norm
        self.output_layer = model.get_output_embeddings()
        self.shape = model_config.from_config(model.config)

    def layer_norms(self, layer) -> list[torch.nn.Module]:
        return [layer.ln_1, layer.ln_2] if self.gpt2 else [layer.input_layernorm, layer.post_attention_layernorm]

    def read_out(self, residual: torch.Tensor) -> torch.Tensor:
        """[..., vocab] float32 logits of a residual-stream vector through the final norm and output layer."""
        return self.output_layer(self.final_norm(residual)).float()

    def part_modules(self) -> dict[str, list[torch.nn.Module]]:
        """Each part's modules, in the order a pass runs them (learned positions are GPT-2's embedding table)."""
        parts = {
            EMBEDDING: [self.body.wte, self.body.wpe] if self.gpt2 else [self.body.embed_tokens],
            POSITIONS: [] if self.gpt2 else [self.body.rotary_emb],
            NORMS: [self.final_norm],
        }
        for i, layer in enumerate(self.layers):
            parts[NORMS] += self.layer_norms(layer)
            parts[f"layer {i} {ATTENTION}"] = [layer.attn if self.gpt2 else layer.self_attn]
            if hasattr(layer.mlp, "experts"):
                parts[f"layer {i} {ROUTER}"], parts[f"layer {i} {EXPERTS}"] = [layer.mlp.gate], [layer.mlp.experts]
            else:
                parts[f"layer {i} {MLP}"] = [layer.mlp]
        parts[OUTPUT] = [self.output_layer]
        return parts

    def query_keys(self, layer, normed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """The layer's own queries [1, heads, tokens, d] and keys [1, kv_heads, tokens, d] of `normed`, its scaling."""
        tokens = normed.shape[1]
        if self.gpt2:
            attention = layer.attn
            q, k, _ = attention.c_attn(normed).split(attention.split_size, dim=-1)
            heads = lambda x: x.view(1, tokens, attention.num_heads, attention.head_dim).transpose(1, 2)
            return heads(q), heads(k), float(attention.scaling)
        attention = layer.self_attn
        q = attention.q_proj(normed).view(1, tokens, -1, attention.head_dim).transpose(1, 2)
        k = attention.k_proj(normed).view(1, tokens, -1, attention.head_dim).transpose(1, 2)
        cos, sin = self.body.rotary_emb(normed, torch.arange(tokens)[None])
        q, k = inspect.getmodule(type(attention)).apply_rotary_pos_emb(q, k, cos, sin)  # the model's own RoPE
        return q, k, float(attention.scaling)

    def attention_weights(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """[heads, tokens]: softmax(q . K / sqrt(d)) of the last position's query against every position's key,
        both made by the layer's own projections from `hidden` [tokens, hidden], the residual stream entering it."""
        normed = self.layer_norms(self.layers[layer])[0](hidden)[None]
        q, k, scaling = self.query_keys(self.layers[layer], normed)
        k = k[0].float().repeat_interleave(q.shape[1] // k.shape[1], dim=0)
        scores = torch.einsum("hd,htd->ht", q[0, :, -1].float(), k) * scaling
        tokens, window = k.shape[1], self.shape.sliding_window
        if self.shape.layer_types[layer] == model_config.SLIDING and tokens > window:
            scores[:, : tokens - window] = float("-inf")
        return torch.softmax(scores, dim=-1)
