"""The one place that knows transformers' module names: one small adapter per architecture.

A view asks an adapter for a model's parts by role (embedding, norms, each layer's attention and MLP or router
and experts, output layer), which the forward boundary times (`TransformersForward.look`), and for a layer's
attention weights recomputed from the hidden states that pass returned. The model is only called, never changed.

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
    "embedding",
    "positions and mask",
    "norms",
    "attention",
    "MLP",
    "router",
    "experts",
    "output layer",
)


class UnsupportedModel(ValueError):
    """The page does not know this architecture's module names; the message is one sentence."""


def layer_part(index: int, kind: str) -> str:
    return f"layer {index} {kind}"


class Adapter:
    """What a view needs of a model, by role: its parts, the final norm, the output layer, attention weights."""

    def __init__(self, model):
        self.model = model
        self.shape = model_config.from_config(model.config)

    @property
    def output_layer(self) -> torch.nn.Module:
        return self.model.get_output_embeddings()

    def read_out(self, residual: torch.Tensor) -> torch.Tensor:
        """[..., vocab] float32 logits of a residual-stream vector through the final norm and output layer."""
        return self.output_layer(self.final_norm()(residual)).float()

    def part_modules(self) -> dict[str, list[torch.nn.Module]]:
        """Each part's modules, in the order a pass runs them."""
        parts = {EMBEDDING: self.embeddings(), POSITIONS: self.positions(), NORMS: [self.final_norm()]}
        for i, layer in enumerate(self.layers):
            parts[NORMS] += self.layer_norms(layer)
            parts[layer_part(i, ATTENTION)] = [self.attention(layer)]
            if hasattr(layer.mlp, "experts"):
                parts[layer_part(i, ROUTER)] = [layer.mlp.gate]
                parts[layer_part(i, EXPERTS)] = [layer.mlp.experts]
            else:
                parts[layer_part(i, MLP)] = [layer.mlp]
        parts[OUTPUT] = [self.output_layer]
        return parts

    def attention_weights(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """[heads, tokens]: softmax(q . K / sqrt(d)) of the last position's query against every position's key,
        both made by the layer's own projections from `hidden` [tokens, hidden], the residual stream entering it."""
        normed = self.layer_norms(self.layers[layer])[0](hidden)[None]  # [1, tokens, hidden]
        q, k, scaling = self.query_keys(self.layers[layer], normed)  # [1, heads, tokens, d], [1, kv_heads, tokens, d]
        k = k[0].float().repeat_interleave(q.shape[1] // k.shape[1], dim=0)
        scores = torch.einsum("hd,htd->ht", q[0, :, -1].float(), k) * scaling
        tokens, window = k.shape[1], self.shape.sliding_window
        if self.shape.layer_types[layer] == model_config.SLIDING and tokens > window:
            scores[:, : tokens - window] = float("-inf")
        return torch.softmax(scores, dim=-1)


class LlamaLayout(Adapter):
    """Llama, Mistral, Qwen2, Mixtral: `model.embed_tokens`, `model.layers`, `model.norm`, `lm_head`."""

    @property
    def layers(self):
        return self.model.model.layers

    def embeddings(self):
        return [self.model.model.embed_tokens]

    def positions(self):
        return [self.model.model.rotary_emb]

    def final_norm(self):
        return self.model.model.norm

    def layer_norms(self, layer):
        return [layer.input_layernorm, layer.post_attention_layernorm]

    def attention(self, layer):
        return layer.self_attn

    def query_keys(self, layer, normed):
        attention, tokens = layer.self_attn, normed.shape[1]
        q = attention.q_proj(normed).view(1, tokens, -1, attention.head_dim).transpose(1, 2)
        k = attention.k_proj(normed).view(1, tokens, -1, attention.head_dim).transpose(1, 2)
        cos, sin = self.model.model.rotary_emb(normed, torch.arange(tokens)[None])
        rotate = inspect.getmodule(type(attention)).apply_rotary_pos_emb  # the model's own RoPE function
        q, k = rotate(q, k, cos, sin)
        return q, k, float(attention.scaling)


class GPT2Layout(Adapter):
    """GPT-2: `transformer.wte` + `wpe`, `transformer.h`, `transformer.ln_f`, `lm_head`."""

    @property
    def layers(self):
        return self.model.transformer.h

    def embeddings(self):
        return [self.model.transformer.wte, self.model.transformer.wpe]

    def positions(self):
        return []  # learned positions are an embedding table; the mask is not a module

    def final_norm(self):
        return self.model.transformer.ln_f

    def layer_norms(self, block):
        return [block.ln_1, block.ln_2]

    def attention(self, block):
        return block.attn

    def query_keys(self, block, normed):
        attention, tokens = block.attn, normed.shape[1]
        q, k, _ = attention.c_attn(normed).split(attention.split_size, dim=-1)
        heads = lambda x: x.view(1, tokens, attention.num_heads, attention.head_dim).transpose(1, 2)  # noqa: E731
        return heads(q), heads(k), float(attention.scaling)


def adapter_for(model) -> Adapter:
    """The adapter for this model, or UnsupportedModel naming its architecture."""
    name = type(model).__name__
    if getattr(model, "is_remote", False):
        raise UnsupportedModel(
            "A serving engine returns tokens and probabilities, not the hidden states and attention weights "
            "inside its forward pass, so this page needs the model's weights in this process."
        )
    if name in LLAMA_LAYOUT:
        return LlamaLayout(model)
    if name in GPT2_LAYOUT:
        return GPT2Layout(model)
    raise UnsupportedModel(
        f"This page knows the insides of {', '.join(n.removesuffix('ForCausalLM') for n in LLAMA_LAYOUT)} and "
        f"GPT-2 models, not {name}; the rest of the app works with it."
    )
