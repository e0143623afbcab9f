"""A lean decode step for Llama-architecture models: transformers' forward, computed faster.

Why it exists: a decode step of the 6M-parameter bundled model is 43 matrix-vector products
and ~150 small element-wise operations. transformers' forward adds mask building, module calls
and output objects around them; this module runs the same operations in the same order on the
same weights and the same `DynamicCache`, and nothing else.

One operation is computed differently: a float32 matrix-vector product is an element-wise
product and a row sum (`_matvec`) instead of `F.linear`. Measured on our 2-core AMD EPYC, MKL's
matrix-vector kernel (what `F.linear` calls for one token) reads the weights at ~9 GB/s; torch's
own multiply and sum run vectorised, and the 43 products of a step take 1.2 ms on two threads
(1.7 on one, as the app runs: see `Limits.torch_threads`) instead of 2.6. Only the order of the
additions differs, so logits differ from `model(...)` by float rounding (tests: within 1e-4 over
60 steps, the same greedy token every step). bfloat16 and quantized weights keep `F.linear` and
stay bit-for-bit equal to `model(...)`.

It is used only for one-token decode steps of models `supports` accepts; prefill and every
other architecture go through transformers unchanged. The model is only read, never changed.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Rotary variants whose cos/sin depend only on the position (not on the sequence length).
STATIC_ROPE_TYPES = {"default", "linear", "llama3"}


def supports(model) -> bool:
    """True when `decode_logits` computes what `model(...)` would (to float rounding for
    float32 weights, bit for bit otherwise)."""
    if type(model).__name__ != "LlamaForCausalLM" or model.training:
        return False
    config = model.config
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if (
        getattr(config, "hidden_act", None) != "silu"
        or getattr(config, "attention_bias", False)
        or getattr(config, "mlp_bias", False)
        or getattr(config, "pretraining_tp", 1) not in (None, 1)
        or rope not in STATIC_ROPE_TYPES
        or getattr(config, "_attn_implementation", None) != "sdpa"
    ):
        return False
    body = getattr(model, "model", None)
    if body is None or type(getattr(model, "lm_head", None)) is not nn.Linear:
        return False
    for layer in body.layers:
        attention, mlp = layer.self_attn, layer.mlp
        projections = (
            attention.q_proj,
            attention.k_proj,
            attention.v_proj,
            attention.o_proj,
            mlp.gate_proj,
            mlp.up_proj,
            mlp.down_proj,
        )
        # Exactly nn.Linear (a quantized weight inside is fine: F.linear dispatches on it
        # just as nn.Linear.forward does); any other module class may compute differently.
        if any(type(p) is not nn.Linear for p in projections):
            return False
    return True


@dataclass(frozen=True)
class _Projection:
    """One nn.Linear's tensors, and whether `_matvec` computes it (plain float32 weights)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    by_rows: bool

    @classmethod
    def of(cls, linear: nn.Linear) -> _Projection:
        weight = linear.weight
        plain = type(weight) in (torch.Tensor, nn.Parameter) and weight.dtype == torch.float32
        return cls(weight, linear.bias, plain)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., in] for one token -> [..., out], as `F.linear(x, weight, bias)`."""
        if not self.by_rows:
            return F.linear(x, self.weight, self.bias)
        out = _matvec(self.weight, x.reshape(-1))
        if self.bias is not None:
            out = out + self.bias
        return out.view(*x.shape[:-1], -1)


# A weight bigger than this (a hub model's output layer: 49,152 x 576 for SmolLM2) is multiplied
# in blocks of rows, so the temporary product stays ~4 MB instead of the weight's size.
BLOCK_ELEMENTS = 1 << 20


def _matvec(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight [out, in] times vector x [in], as (weight * x).sum(-1): see the module docstring."""
    rows = max(1, BLOCK_ELEMENTS // weight.shape[1])
    if weight.shape[0] <= rows:
        return (weight * x).sum(-1)
    out = torch.empty(weight.shape[0], dtype=weight.dtype)
    for start in range(0, weight.shape[0], rows):
        torch.sum(weight[start : start + rows] * x, -1, out=out[start : start + rows])
    return out


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's tensors and sizes, read out once: attribute lookups on nn.Module
    cost more than the small vector operations they feed."""

    input_norm: torch.Tensor
    q: _Projection
    k: _Projection
    v: _Projection
    o: _Projection
    post_norm: torch.Tensor
    gate: _Projection
    up: _Projection
    down: _Projection
    eps: float
    head_dim: int
    scaling: float
    grouped: bool


# Per model: its layers' tensors read out once, or None where `supports` said no. Dropped
# with the model; only ever read from it.
_PLANS: weakref.WeakKeyDictionary[nn.Module, _Plan | None] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _Plan:
    layers: list[_Layer]
    lm_head: _Projection
    rotation: tuple[torch.Tensor, torch.Tensor]  # see `_rotation`


def _plan(model) -> _Plan | None:
    if model not in _PLANS:
        _PLANS[model] = (
            _Plan(
                layers=[
                    _Layer(
                        input_norm=layer.input_layernorm.weight,
                        post_norm=layer.post_attention_layernorm.weight,
                        q=_Projection.of(layer.self_attn.q_proj),
                        k=_Projection.of(layer.self_attn.k_proj),
                        v=_Projection.of(layer.self_attn.v_proj),
                        o=_Projection.of(layer.self_attn.o_proj),
                        gate=_Projection.of(layer.mlp.gate_proj),
                        up=_Projection.of(layer.mlp.up_proj),
                        down=_Projection.of(layer.mlp.down_proj),
                        eps=layer.input_layernorm.variance_epsilon,
                        head_dim=layer.self_attn.head_dim,
                        scaling=layer.self_attn.scaling,
                        grouped=layer.self_attn.num_key_value_groups > 1,
                    )
                    for layer in model.model.layers
                ],
                lm_head=_Projection.of(model.lm_head),
                rotation=_rotation(model.model.layers[0].self_attn.head_dim),
            )
            if supports(model)
            else None
        )
    return _PLANS[model]


def float32_row_sums(model) -> bool:
    """True when the lean step does this model's products as row sums (float32 weights)."""
    plan = _plan(model)
    return plan is not None and plan.lm_head.by_rows


@torch.inference_mode()
def decode_step(model, token_id: int, cache) -> torch.Tensor:
    """One decode step for any causal LM: feed `token_id` after `cache`, return the [vocab]
    next-token logits. The lean path where `supports` says yes, transformers' forward elsewhere."""
    if _plan(model) is not None:
        return decode_logits(model, token_id, cache)
    out = model(input_ids=torch.tensor([[token_id]], dtype=torch.long), cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, operation for operation (float32 statistics); its casts
    are skipped for float32 input, where they return the tensor itself."""
    if x.dtype == torch.float32:
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    x32 = x.to(torch.float32)
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def _rotation(head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' rotate_half(x) = cat(-x[half:], x[:half]) as one gather and a sign:
    rotate_half(x) * sin == x[..., order] * (sin * sign) exactly, since (-a) * b == a * (-b)."""
    half = head_dim // 2
    order = torch.cat([torch.arange(half, head_dim), torch.arange(half)])
    sign = torch.cat([-torch.ones(half), torch.ones(head_dim - half)])
    return order, sign


@torch.inference_mode()
def decode_logits(model, token_id: int, cache) -> torch.Tensor:
    """Feed one token at the end of `cache` (updated in place, as transformers does) and
    return the next-token logits, shape [vocab]. Only for models `supports` accepts."""
    plan = _plan(model)
    if plan is None:
        raise ValueError(f"{type(model).__name__} has no lean decode step: use `decode_step`")
    body = model.model
    x = body.embed_tokens.weight[token_id].view(1, 1, -1)
    cos, sin = body.rotary_emb(x, torch.tensor([[cache.get_seq_length()]]))
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [1, 1, 1, head_dim]: broadcast over heads
    rotated, sign = plan.rotation
    signed_sin = sin * sign.to(sin.dtype)
    for index, layer in enumerate(plan.layers):
        h = _rms_norm(x, layer.input_norm, layer.eps)
        q = layer.q(h).view(1, 1, -1, layer.head_dim).transpose(1, 2)
        k = layer.k(h).view(1, 1, -1, layer.head_dim).transpose(1, 2)
        v = layer.v(h).view(1, 1, -1, layer.head_dim).transpose(1, 2)
        q = q * cos + q.index_select(-1, rotated) * signed_sin
        k = k * cos + k.index_select(-1, rotated) * signed_sin
        k, v = cache.update(k, v, index)
        # One query attends to every cached position, so no mask; GQA shares K/V heads.
        attended = F.scaled_dot_product_attention(q, k, v, scale=layer.scaling, enable_gqa=layer.grouped)
        x = x + layer.o(attended.transpose(1, 2).reshape(1, 1, -1))
        h = _rms_norm(x, layer.post_norm, layer.eps)
        x = x + layer.down(F.silu(layer.gate(h)) * layer.up(h))
    final = _rms_norm(x, body.norm.weight, body.norm.variance_epsilon)
    return plan.lm_head(final[0, -1])
