"""The one place that knows transformers' module names: one small adapter per architecture.

A forward pass is walked part by part with the model's own modules, in the order its `forward` calls
them (embedding, then per layer: norm, attention, residual add, norm, MLP or router and experts,
residual add; final norm, output layer), each part timed by a `Clock`. The model is only called,
never changed: no hook, no attribute, no attention implementation switched (the KV cache is ours).

    adapter = adapter_for(model)               # UnsupportedModel (one sentence) for other architectures
    walked = adapter.walk(ids, cache, clock)   # residual stream after every layer, logits of the last position
    q = adapter.query(layer, walked, position) # [heads, head_dim]: the last position's query, as attention made it

Supported: Llama, Mistral, Qwen2 and Mixtral (one layout: `model.layers[i].self_attn`, `mlp` or
`mlp.gate` + `mlp.experts`, RMSNorm, rotary positions) and GPT-2 (`transformer.h[i].attn`,
`mlp`, LayerNorm, learned positions).
"""

from __future__ import annotations

import inspect
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

from inference.core import model_config

LLAMA_LAYOUT = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "MixtralForCausalLM")
GPT2_LAYOUT = ("GPT2LMHeadModel",)
SUPPORTED = LLAMA_LAYOUT + GPT2_LAYOUT

# Part kinds, in the order a pass runs them; a part's name is its kind, with "layer i " before it for a layer's part.
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


class Clock:
    """Milliseconds spent in each named part of one pass (perf_counter around each call)."""

    def __init__(self):
        self.ms: dict[str, float] = defaultdict(float)

    @contextmanager
    def part(self, name: str):
        start = time.perf_counter()
        yield
        self.ms[name] += (time.perf_counter() - start) * 1000


@dataclass
class Walked:
    """What one walked pass leaves: every layer's input to attention and the residual stream after every layer."""

    positions: torch.Tensor  # [1, tokens] absolute positions of the tokens fed
    residuals: list[torch.Tensor] = field(default_factory=list)  # L + 1 of [tokens, hidden]: 0 = embeddings
    attention_inputs: list[torch.Tensor] = field(default_factory=list)  # L of [tokens, hidden]: after the norm
    experts: list[torch.Tensor] = field(default_factory=list)  # MoE: L of [tokens, k] experts chosen
    position_embeddings: tuple | None = None  # rotary (cos, sin) of the tokens fed
    logits: torch.Tensor | None = None  # [vocab] float32, last position


def layer_part(index: int, kind: str) -> str:
    return f"layer {index} {kind}"


class Adapter:
    """What a view needs of a model, by role: layers, norms, output layer, queries."""

    def __init__(self, model):
        self.model = model
        self.shape = model_config.from_config(model.config)

    # -- what each part holds (for bytes) ------------------------------------------------------
    def part_modules(self) -> dict[str, list[torch.nn.Module]]:
        raise NotImplementedError

    def final_norm(self) -> torch.nn.Module:
        raise NotImplementedError

    @property
    def output_layer(self) -> torch.nn.Module:
        return self.model.get_output_embeddings()

    def read_out(self, residual: torch.Tensor) -> torch.Tensor:
        """[..., vocab] float32 logits of a residual-stream vector through the final norm and output layer."""
        return self.output_layer(self.final_norm()(residual)).float()

    # -- the pass, part by part: one order for every layout, each layout naming its modules ----------
    def walk(self, ids: list[int], cache, clock: Clock) -> Walked:
        """Feed `ids` after what `cache` holds, in the order the model's forward runs its parts."""
        past = cache.get_seq_length()
        walked = Walked(torch.arange(past, past + len(ids)).unsqueeze(0))  # absolute positions, after the cached
        with clock.part(EMBEDDING):
            embeds, hidden = self._embed(torch.tensor([ids], dtype=torch.long), walked.positions)  # [1, tokens, hidden]
        with clock.part(POSITIONS):
            masks = self._positions(embeds, cache, walked)
        walked.residuals.append(hidden[0])
        for i, layer in enumerate(self.layers):
            before_attention, before_mlp = self.layer_norms(layer)
            with clock.part(NORMS):
                normed = before_attention(hidden)
            walked.attention_inputs.append(normed[0])
            with clock.part(layer_part(i, ATTENTION)):
                hidden = hidden + self._attend(layer, normed, masks[i], cache, walked)
            with clock.part(NORMS):
                normed = before_mlp(hidden)
            hidden = self._feed_forward(i, layer, hidden, normed, clock, walked)
            walked.residuals.append(hidden[0])
        # the final norm and the output layer, for the last position only (as the step engine asks)
        with clock.part(NORMS):
            last = self.final_norm()(hidden[:, -1])
        with clock.part(OUTPUT):
            walked.logits = self.output_layer(last)[0].float()
        return walked

    @property
    def layers(self) -> torch.nn.ModuleList:
        raise NotImplementedError

    def layer_norms(self, layer) -> tuple[torch.nn.Module, torch.nn.Module]:
        """The layer's norm before attention and its norm before the MLP."""
        raise NotImplementedError

    def _embed(self, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the token embeddings, the residual stream entering layer 0), each [1, tokens, hidden]."""
        raise NotImplementedError

    def _positions(self, embeds: torch.Tensor, cache, walked: Walked) -> list:
        """Each layer's attention mask, built by transformers' own functions as the model's forward does; a layout
        with rotary positions also stores their (cos, sin) in `walked`."""
        raise NotImplementedError

    def _attend(self, layer, normed: torch.Tensor, mask, cache, walked: Walked) -> torch.Tensor:
        """The layer's attention output for `normed` (its keys and values written to `cache`)."""
        raise NotImplementedError

    def _feed_forward(self, index: int, layer, hidden, normed, clock: Clock, walked: Walked) -> torch.Tensor:
        """The residual stream after the layer's MLP (one timed part; an MoE layout times router and experts)."""
        with clock.part(layer_part(index, MLP)):
            return hidden + layer.mlp(normed)

    def query(self, layer: int, walked: Walked, position: int) -> torch.Tensor:
        raise NotImplementedError

    def scaling(self, layer: int) -> float:
        raise NotImplementedError


class LlamaLayout(Adapter):
    """Llama, Mistral, Qwen2, Mixtral: `model.embed_tokens`, `model.layers`, `model.norm`, `lm_head`."""

    @property
    def body(self):
        return self.model.model

    @property
    def layers(self):
        return self.body.layers

    def layer_norms(self, layer):
        return layer.input_layernorm, layer.post_attention_layernorm

    @property
    def sparse(self) -> bool:
        return hasattr(self.layers[0].mlp, "experts")

    def final_norm(self):
        return self.body.norm

    def part_modules(self):
        parts = {EMBEDDING: [self.body.embed_tokens], NORMS: [self.body.norm], OUTPUT: [self.output_layer]}
        for i, layer in enumerate(self.layers):
            parts[NORMS] += self.layer_norms(layer)
            parts[layer_part(i, ATTENTION)] = [layer.self_attn]
            if self.sparse:
                parts[layer_part(i, ROUTER)] = [layer.mlp.gate]
                parts[layer_part(i, EXPERTS)] = [layer.mlp.experts]
            else:
                parts[layer_part(i, MLP)] = [layer.mlp]
        return parts

    def _embed(self, input_ids, positions):
        hidden = self.body.embed_tokens(input_ids)
        return hidden, hidden

    def _positions(self, embeds, cache, walked):
        config, masks = self.model.config, {}
        for kind in set(self.shape.layer_types):  # one mask per layer type
            build = create_sliding_window_causal_mask if kind == model_config.SLIDING else create_causal_mask
            masks[kind] = build(
                config=config, inputs_embeds=embeds, attention_mask=None, cache=cache, position_ids=walked.positions
            )
        walked.position_embeddings = self.body.rotary_emb(embeds, walked.positions)
        return [masks[kind] for kind in self.shape.layer_types]

    def _attend(self, layer, normed, mask, cache, walked):
        attended, _ = layer.self_attn(
            hidden_states=normed, position_embeddings=walked.position_embeddings, attention_mask=mask, cache=cache
        )
        return attended

    def _feed_forward(self, index, layer, hidden, normed, clock, walked):
        if not self.sparse:
            return super()._feed_forward(index, layer, hidden, normed, clock, walked)
        flat = normed.view(-1, normed.shape[-1])  # MixtralSparseMoeBlock.forward, in its two parts
        with clock.part(layer_part(index, ROUTER)):
            _, weights, chosen = layer.mlp.gate(flat)
        with clock.part(layer_part(index, EXPERTS)):
            hidden = hidden + layer.mlp.experts(flat, chosen, weights).view_as(hidden)
        walked.experts.append(chosen)
        return hidden

    def query(self, layer, walked, position):
        attention = self.layers[layer].self_attn
        x = walked.attention_inputs[layer][position]  # [hidden]
        q = attention.q_proj(x).view(1, 1, -1, attention.head_dim).transpose(1, 2)  # [1, heads, 1, head_dim]
        cos, sin = walked.position_embeddings
        rotate = inspect.getmodule(type(attention)).apply_rotary_pos_emb  # the model's own RoPE function
        q, _ = rotate(q, q, cos[:, position : position + 1], sin[:, position : position + 1])
        return q[0, :, 0]

    def scaling(self, layer):
        return float(self.layers[layer].self_attn.scaling)


class GPT2Layout(Adapter):
    """GPT-2: `transformer.wte` + `wpe`, `transformer.h`, `transformer.ln_f`, `lm_head`."""

    @property
    def body(self):
        return self.model.transformer

    @property
    def layers(self):
        return self.body.h

    def layer_norms(self, block):
        return block.ln_1, block.ln_2

    def final_norm(self):
        return self.body.ln_f

    def part_modules(self):
        parts = {EMBEDDING: [self.body.wte, self.body.wpe], NORMS: [self.body.ln_f], OUTPUT: [self.output_layer]}
        for i, block in enumerate(self.layers):
            parts[NORMS] += self.layer_norms(block)
            parts[layer_part(i, ATTENTION)] = [block.attn]
            parts[layer_part(i, MLP)] = [block.mlp]
        return parts

    def _embed(self, input_ids, positions):
        embeds = self.body.wte(input_ids)
        return embeds, self.body.drop(embeds + self.body.wpe(positions))

    def _positions(self, embeds, cache, walked):
        mask = create_causal_mask(
            config=self.model.config,
            inputs_embeds=embeds,
            attention_mask=None,
            cache=cache,
            position_ids=walked.positions,
        )
        return [mask] * len(self.layers)

    def _attend(self, block, normed, mask, cache, walked):
        attended, _ = block.attn(normed, cache=cache, attention_mask=mask)
        return attended

    def query(self, layer, walked, position):
        attention = self.layers[layer].attn
        x = walked.attention_inputs[layer][position]
        q = attention.c_attn(x.view(1, -1)).split(attention.split_size, dim=-1)[0]
        return q.view(attention.num_heads, attention.head_dim)

    def scaling(self, layer):
        return float(self.layers[layer].attn.scaling)


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
