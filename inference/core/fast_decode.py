"""Lean forward passes for Llama-architecture models: transformers' forward, computed faster.

Why it exists: a decode step of the 6M-parameter bundled model is 43 matrix-vector products
and ~150 small element-wise operations. transformers' forward adds mask building, module calls
and output objects around them; this module runs the same operations on the same weights and
the same `DynamicCache`, and nothing else. Two entry points:

- `decode_logits`: one token (a decode step), the hot path of every page;
- `forward_logits`: several tokens at once on top of the cache (a prompt or a chunk of one), with the
  last `keep` positions' logits;
- `few_tokens_logits`: a speculative pass of 2 to 8 tokens (a verify pass of gamma + 1, a draft
  catching up), the same operations with every product through the few-rows kernel
  (`inference.core.small_matmul`) on float32 weights.

`forward_logits`: transformers' own operations in its own order (F.linear, its causal mask and
its attention call), so the logits equal `model(...)` bit for bit in every precision (tests).
`few_tokens_logits`: the same but for the order of additions inside the products (within 1e-4,
the same argmax at every position: tests/test_small_matmul.py), where MKL's SGEMM for 5 rows
costs ~1.8 one-token steps.

`decode_logits` and `few_tokens_logits`, float32 weights, a DynamicCache: the whole pass is one C call
(`inference.core.fused_step`: every layer's norms, products, rotary, attention over the cache and MLP, no torch
operator between them; products on weights packed in panels, `packed_matmul.c`): a bundled-model step 0.40 ms
(0.30 of it in C) against 1.34 ms through the torch path below, a 5-token verify pass 0.86 ms (0.73-0.81 in C)
(AMD EPYC Zen 4, one thread, idle, 2026-12-02, 100 tokens cached). A verify pass's rows equal one-token steps bit
for bit (tests/test_packed_matmul.py); logits and cache within float rounding of transformers
(tests/test_fused_step.py). Where it cannot run (no compiler, `INFERENCE_LAB_FUSED_STEP=0`, another cache layer)
the torch path does.

The torch path, float32 weights: three things are computed differently, each measured or proven:
- a matrix-vector product goes through the few-rows kernel (`inference.core.small_matmul`, one
  weight row against the vector at a time in AVX2 registers) instead of `F.linear`, or where that
  kernel is not built, an element-wise product and a row sum (`_row_sums`: torch's vectorised
  multiply and sum, which on the AMD EPYC this was first written on took 1.2 ms for a step's 43
  products against MKL's 2.6). Measured on the 2-core AMD EPYC VM, one thread, idle: a bundled-model
  step took 5.1-5.2 ms with the kernel, 7.5-7.6 with the row sums, 5.3-6.4 with torch.mv (MKL).
  Only the order of the additions differs, so logits differ from `model(...)` by float rounding
  (tests: within 1e-4 over 60 steps, the same greedy token every step);
- q, k and v are one product with their weights stacked, and so are the MLP's gate and up
  (`_Layer.qkv`, `_Layer.gate_up`): each output is one row's sum either way (kernel or row sums), so
  the numbers are the same (tested), for 2 operations per layer instead of 6;
- the rotary cos/sin come from a table of every position computed once (`_RopeTable`) with
  transformers' own rotary module: the same values (tested) without its 7 operations a step.
bfloat16 and quantized weights keep `F.linear` and transformers' order throughout, and stay
bit-for-bit equal to `model(...)`.

Only models `supports` accepts take these paths; every other architecture goes through
transformers unchanged (`decode_step`, `forward_step`). The model is only read, never changed:
what this module keeps (stacked weights, the rotary table) lives beside it, dropped with it.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from inference.core import fused_step, small_matmul

# Rotary variants whose cos/sin depend only on the position (not on the sequence length).
STATIC_ROPE_TYPES = {"default", "linear", "llama3"}
# transformers hands grouped-query attention to sdpa's own `enable_gqa` only up to this head size.
MAX_GQA_HEAD_DIM = 256
# Stacked q/k/v and gate/up weights are copies: made only while they stay this small in all
# (the bundled model: 17 MB), so a hub model does not double its projections' memory.
MAX_STACKED_BYTES = 64 * 2**20


def supports(model) -> bool:
    """True when the lean passes compute what `model(...)` would (to float rounding for one
    float32 token, bit for bit otherwise)."""
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
    if body is None or type(getattr(model, "lm_head", None)) is not nn.Linear or model.lm_head.bias is not None:
        return False
    if type(body.embed_tokens) is not nn.Embedding or len(body.layers) != config.num_hidden_layers:
        return False
    for layer in body.layers:
        attention, mlp = layer.self_attn, layer.mlp
        if attention.head_dim > MAX_GQA_HEAD_DIM:
            return False
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
    """One nn.Linear's tensors, and whether `_matvec` computes it for one token (plain float32 weights)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    by_rows: bool

    @classmethod
    def of(cls, linear: nn.Linear) -> _Projection:
        weight = linear.weight
        plain = type(weight) in (torch.Tensor, nn.Parameter) and weight.dtype == torch.float32
        return cls(weight, linear.bias, plain)

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., in] -> [..., out], as nn.Linear.forward computes it."""
        return F.linear(x, self.weight, self.bias)


# A weight bigger than this (a hub model's output layer: 49,152 x 576 for SmolLM2) is multiplied
# in blocks of rows, so the temporary product stays ~4 MB instead of the weight's size.
BLOCK_ELEMENTS = 1 << 20


def _matvec(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight [out, in] times vector x [in]: through the few-rows kernel where it is available, else as
    (weight * x).sum(-1); see the module docstring."""
    if weight.is_contiguous() and small_matmul.available():
        return small_matmul.linear(x.view(1, -1), weight).view(-1)
    return _row_sums(weight, x)


def _row_sums(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """weight [out, in] times vector x [in] as (weight * x).sum(-1), a hub model's big output layer in blocks."""
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
    heads: int
    kv_heads: int
    scaling: float
    groups: int  # query heads per K/V head
    qkv: torch.Tensor | None  # q, k, v weights stacked (float32 one-token steps), None where not made
    gate_up: torch.Tensor | None  # gate, up weights stacked, likewise

    @property
    def grouped(self) -> bool:
        return self.groups > 1


class _RopeTable:
    """cos and sin · sign (see `_rotation`) for positions 0, 1, ..., from the model's own rotary
    module, grown (doubling) as longer sequences arrive. Element-wise functions of the position,
    so one row equals what the module gives for that position alone (tested). Shared by every
    run of the model: a grown table replaces the old one in one assignment."""

    def __init__(self, rotary: nn.Module, dtype: torch.dtype, sign: torch.Tensor):
        self._rotary, self._dtype, self._sign = rotary, dtype, sign
        self._table: tuple | None = None  # see `_covering`
        self._lock = threading.Lock()

    def rows(self, start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """([count, head_dim] cos, [count, head_dim] signed sin) for positions start .. start + count - 1."""
        cos, sin = self._covering(start + count)[:2]
        return cos[start : start + count], sin[start : start + count]

    def addresses(self, start: int, count: int) -> tuple[int, int, tuple]:
        """Where `rows(start, count)` starts in memory: (cos address, signed sin address, the table to hold until the
        C call has read them). No views are made: each torch slice cost ~20 us right after a pass (Intel Xeon VM,
        2026-12-03, caches cold), and a draft's round needs its rows every round."""
        table = self._covering(start + count)
        return table[2] + start * table[4], table[3] + start * table[4], table

    def _covering(self, positions: int) -> tuple:
        """The table with at least `positions` rows: (cos, signed sin, their addresses, bytes a row)."""
        table = self._table
        if table is None or table[0].shape[0] < positions:
            with self._lock:
                table = self._table
                if table is None or table[0].shape[0] < positions:
                    size = max(positions, 2 * (0 if table is None else table[0].shape[0]), 256)
                    probe = torch.empty(0, dtype=self._dtype)  # the module reads only its dtype
                    cos, sin = self._rotary(probe, torch.arange(size).unsqueeze(0))
                    # contiguous rows: `fused_step` hands their memory to C as they are
                    cos, sin = cos[0].contiguous(), (sin[0] * self._sign.to(sin.dtype)).contiguous()
                    table = (cos, sin, cos.data_ptr(), sin.data_ptr(), cos.stride(0) * cos.element_size())
                    self._table = table
        return table


# Per model: its layers' tensors read out once, or None where `supports` said no. Dropped
# with the model; only ever read from it.
_PLANS: weakref.WeakKeyDictionary[nn.Module, _Plan | None] = weakref.WeakKeyDictionary()
_PLANS_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Plan:
    layers: list[_Layer]
    embed: torch.Tensor
    final_norm: torch.Tensor
    final_eps: float
    lm_head: _Projection
    rotated: torch.Tensor  # see `_rotation`
    rope: _RopeTable
    float32: bool  # every product's weight plain float32: one token takes `_one_float32_token`
    fused: fused_step.FusedPlan | None = None  # the whole pass in one C call (`fused_step`), where it can be made

    def fused_for(self, cache) -> fused_step.FusedPlan | None:
        """The fused pass for this cache, or None where the torch paths run."""
        fused = self.fused
        if (
            fused is None
            or not fused_step.usable()
            or not fused_step.takes_cache(cache, fused.layers)
            or not fused.still_valid()
        ):
            return None
        return fused


def _stacked(projections: list[_Projection], budget: list[int]) -> torch.Tensor | None:
    """The projections' float32 weights stacked row-wise, while `budget` (bytes, shared) lasts."""
    if not all(p.by_rows and p.bias is None for p in projections):
        return None
    size = sum(p.weight.numel() for p in projections) * 4
    if size > budget[0]:
        return None
    budget[0] -= size
    return torch.cat([p.weight.detach() for p in projections])


def _layer(layer, budget: list[int]) -> _Layer:
    attention, mlp = layer.self_attn, layer.mlp
    q, k, v = (_Projection.of(attention.q_proj), _Projection.of(attention.k_proj), _Projection.of(attention.v_proj))
    gate, up = _Projection.of(mlp.gate_proj), _Projection.of(mlp.up_proj)
    return _Layer(
        input_norm=layer.input_layernorm.weight,
        post_norm=layer.post_attention_layernorm.weight,
        q=q,
        k=k,
        v=v,
        o=_Projection.of(attention.o_proj),
        gate=gate,
        up=up,
        down=_Projection.of(mlp.down_proj),
        eps=layer.input_layernorm.variance_epsilon,
        head_dim=attention.head_dim,
        heads=attention.q_proj.out_features // attention.head_dim,
        kv_heads=attention.k_proj.out_features // attention.head_dim,
        scaling=attention.scaling,
        groups=attention.num_key_value_groups,
        qkv=_stacked([q, k, v], budget),
        gate_up=_stacked([gate, up], budget),
    )


def _plan(model) -> _Plan | None:
    plan = _PLANS.get(model, False)
    if plan is not False:
        return plan
    with _PLANS_LOCK:
        if model not in _PLANS:
            _PLANS[model] = _make_plan(model) if supports(model) else None
        return _PLANS[model]


@torch.inference_mode()
def _make_plan(model) -> _Plan:
    body = model.model
    budget = [MAX_STACKED_BYTES]
    rotated, sign = _rotation(body.layers[0].self_attn.head_dim)
    layers = [_layer(layer, budget) for layer in body.layers]
    lm_head = _Projection.of(model.lm_head)
    projections = [lm_head] + [p for layer in layers for p in (layer.q, layer.k, layer.v, layer.o)]
    projections += [p for layer in layers for p in (layer.gate, layer.up, layer.down)]
    plan = _Plan(
        layers=layers,
        embed=body.embed_tokens.weight,
        final_norm=body.norm.weight,
        final_eps=body.norm.variance_epsilon,
        lm_head=lm_head,
        rotated=rotated,
        rope=_RopeTable(body.rotary_emb, body.embed_tokens.weight.dtype, sign),
        float32=all(p.by_rows for p in projections),
    )
    return dataclasses.replace(plan, fused=fused_step.make(plan))


def float32_row_sums(model) -> bool:
    """True when the lean step does this model's products itself (float32 weights: the few-rows kernel, or row sums)."""
    plan = _plan(model)
    return plan is not None and plan.float32


def fused_pass(model) -> bool:
    """True when this model's float32 passes can take the one-call C pass (`fused_step`): its plan could be made
    (a hub model past the stacking budget keeps the torch path). Whether a given call takes it also depends on the
    cache and the switch (`_Plan.fused_for`)."""
    plan = _plan(model)
    return plan is not None and plan.fused is not None


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


def _repeat_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    """transformers' repeat_kv: [1, kv_heads, length, head_dim] -> [1, kv_heads * groups, length, head_dim]."""
    batch, kv_heads, length, head_dim = states.shape
    expanded = states[:, :, None, :, :].expand(batch, kv_heads, groups, length, head_dim)
    return expanded.reshape(batch, kv_heads * groups, length, head_dim)


# -- entry points --------------------------------------------------------------------------


@torch.inference_mode()
def decode_step(model, token_id: int, cache) -> torch.Tensor:
    """One decode step for any causal LM: feed `token_id` after `cache`, return the [vocab]
    next-token logits. The lean path where `supports` says yes, transformers' forward elsewhere."""
    if _plan(model) is not None:
        return decode_logits(model, token_id, cache)
    out = model(input_ids=torch.tensor([[token_id]], dtype=torch.long), cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1]


@torch.inference_mode()
def forward_step(model, token_ids: list[int], cache, keep: int = 1) -> torch.Tensor:
    """Feed `token_ids` after `cache` (updated in place) on any causal LM; the last `keep`
    positions' logits, [keep, vocab] in the model's dtype, equal to transformers' bit for bit:
    `forward_logits` where `supports` says yes, transformers' forward elsewhere."""
    if _plan(model) is not None:
        return forward_logits(model, token_ids, cache, keep)
    ids = torch.tensor([list(token_ids)], dtype=torch.long)
    return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=keep).logits[0]


def _lean_plan(model) -> _Plan:
    plan = _plan(model)
    if plan is None:
        raise ValueError(f"{type(model).__name__} has no lean forward pass: use `decode_step` or `forward_step`")
    return plan


@torch.inference_mode()
def decode_logits(model, token_id: int, cache) -> torch.Tensor:
    """Feed one token at the end of `cache` (updated in place, as transformers does) and
    return the next-token logits, shape [vocab]. Only for models `supports` accepts."""
    plan = _lean_plan(model)
    fused = plan.fused_for(cache)
    if fused is not None:
        return fused_step.forward(fused, plan.embed, plan.rope, [token_id], cache, 1)[0]
    if plan.float32:
        return _one_float32_token(plan, token_id, cache)
    return _tokens(plan, [token_id], cache, 1)[0]


@torch.inference_mode()
def forward_logits(model, token_ids: list[int], cache, keep: int = 1) -> torch.Tensor:
    """Feed `token_ids` at the end of `cache` (updated in place) and return the last `keep`
    positions' next-token logits, [keep, vocab]: transformers' arithmetic in every precision,
    even for one token (a one-token decode step is `decode_logits`). Only for models `supports` accepts."""
    plan = _lean_plan(model)
    if not token_ids or not 1 <= keep <= len(token_ids):
        raise ValueError(f"Feed at least one token and keep 1 to {len(token_ids)} positions, not {keep}")
    return _tokens(plan, list(token_ids), cache, keep)


def _one_float32_token(plan: _Plan, token_id: int, cache) -> torch.Tensor:
    """One token through float32 weights: row sums, stacked projections, the rotary table
    (see the module docstring). Vectors stay 1-D until attention needs heads."""
    x = plan.embed[token_id]
    cos, signed_sin = plan.rope.rows(cache.get_seq_length(), 1)
    rotated = plan.rotated
    for index, layer in enumerate(plan.layers):
        h = _rms_norm(x, layer.input_norm, layer.eps)
        if layer.qkv is not None:
            qkv = _matvec(layer.qkv, h)
        else:
            qkv = torch.cat([_matvec(layer.q.weight, h), _matvec(layer.k.weight, h), _matvec(layer.v.weight, h)])
        heads, kv_heads, head_dim = layer.heads, layer.kv_heads, layer.head_dim
        # q and k rotate together: [heads + kv_heads, head_dim] rows, one position.
        qk = qkv[: (heads + kv_heads) * head_dim].view(heads + kv_heads, head_dim)
        qk = qk * cos + qk.index_select(-1, rotated) * signed_sin
        q = qk[:heads].view(1, heads, 1, head_dim)
        k = qk[heads:].view(1, kv_heads, 1, head_dim)
        v = qkv[(heads + kv_heads) * head_dim :].view(1, kv_heads, 1, head_dim)
        k, v = cache.update(k, v, index)
        # One query attends to every cached position, so no mask; GQA shares K/V heads.
        attended = F.scaled_dot_product_attention(q, k, v, scale=layer.scaling, enable_gqa=layer.grouped)
        x = x + _matvec(layer.o.weight, attended.view(-1))
        h = _rms_norm(x, layer.post_norm, layer.eps)
        if layer.gate_up is not None:
            gate, up = _matvec(layer.gate_up, h).split(layer.gate.weight.shape[0])
        else:
            gate, up = _matvec(layer.gate.weight, h), _matvec(layer.up.weight, h)
        x = x + _matvec(layer.down.weight, F.silu(gate) * up)
    return _matvec(plan.lm_head.weight, _rms_norm(x, plan.final_norm, plan.final_eps))


@torch.inference_mode()
def few_tokens_logits(model, token_ids: list[int], cache, keep: int = 1) -> torch.Tensor:
    """`forward_logits`, except that a pass of 2 to `small_matmul.MAX_ROWS` tokens on float32 weights (a speculative
    verify pass) multiplies through the few-rows kernel where it is available: about one decode step's cost instead
    of ~1.8, with logits equal to transformers' to float rounding, as a one-token step's are (tests), not bit for bit.
    A longer pass after a cache that holds text (a verify pass at γ >= 8) runs as fused passes of at most
    `MAX_ROWS` (`_fused_chunks`); a longer prompt keeps `forward_logits`."""
    plan = _lean_plan(model)
    token_ids = list(token_ids)
    if plan.float32 and len(token_ids) > small_matmul.MAX_ROWS and cache.get_seq_length() > 0:
        fused = plan.fused_for(cache)
        if fused is not None and 1 <= keep <= len(token_ids):
            return _fused_chunks(plan, fused, token_ids, cache, keep)
    few = plan.float32 and 1 < len(token_ids) <= small_matmul.MAX_ROWS and 1 <= keep <= len(token_ids)
    fused = plan.fused_for(cache) if few else None
    if fused is not None:
        return fused_step.forward(fused, plan.embed, plan.rope, token_ids, cache, keep)
    if few and small_matmul.available():  # (the kernel is built on its first use, here)
        return _tokens(plan, list(token_ids), cache, keep, few_rows=True)
    return forward_logits(model, token_ids, cache, keep)


# Per model: fused passes whose output layer scores a shortlist of token ids, by the shortlist's bytes. Dropped with
# the model; the model is only read.
_SHORTLISTED: weakref.WeakKeyDictionary[nn.Module, dict] = weakref.WeakKeyDictionary()


def shortlist_logits(model, token_ids: list[int], cache, keep: int, rows: torch.Tensor) -> torch.Tensor | None:
    """The pass `decode_logits` (one token) or `few_tokens_logits` (2 to `small_matmul.MAX_ROWS`) would run, with an
    output layer that multiplies only the vocabulary rows `rows` (sorted ids, int64): [keep, len(rows)] logits, each
    bit for bit the full pass's logit of that id (tests). None where that pass is not the fused one (the caller
    then computes the full logits and keeps the same columns)."""
    plan = _plan(model)
    if plan is None or not plan.float32 or not 1 <= len(token_ids) <= small_matmul.MAX_ROWS:
        return None
    if not 1 <= keep <= len(token_ids):
        return None
    shortlisted = fused_plan(model, cache, rows)
    if shortlisted is None:
        return None
    return fused_step.forward(shortlisted, plan.embed, plan.rope, list(token_ids), cache, keep)


def fused_plan(model, cache, rows: torch.Tensor | None = None) -> fused_step.FusedPlan | None:
    """The one-call C pass of `model` over `cache` (`_Plan.fused_for`), its output layer scoring only the vocabulary
    rows `rows` (sorted ids, int64) when given; None where that pass cannot run (the torch paths then do)."""
    plan = _plan(model)
    fused = None if plan is None else plan.fused_for(cache)
    if fused is None or rows is None:
        return fused
    key = rows.numpy().tobytes()
    with _PLANS_LOCK:
        kept = _SHORTLISTED.setdefault(model, {})
        made_from, shortlisted = kept.get(key, (None, None))
        if made_from is not fused:
            shortlisted = fused_step.with_output_rows(fused, plan.lm_head.weight, rows)
            kept[key] = (fused, shortlisted)
    return shortlisted


def lean_plan_parts(model) -> tuple[torch.Tensor, _RopeTable]:
    """The embedding table and rotary table the fused pass reads (`fused_step.call`): a run that keeps its own cache
    block (`inference.core.fixed_cache`) feeds the C pass with them."""
    plan = _lean_plan(model)
    return plan.embed, plan.rope


def _fused_chunks(plan: _Plan, fused, token_ids: list[int], cache, keep: int) -> torch.Tensor:
    """A verify pass of more than `small_matmul.MAX_ROWS` tokens (γ from 8 up) as fused passes of at most that many,
    one after the other on the cache: the packed products give a row the same numbers whatever the rows beside it, so
    the logits equal one fused pass's (and one-token steps'), bit for bit (tests). It took the torch path before: a
    9-token verify pass cost ~8 one-token passes against ~3 for 8 tokens (AMD EPYC VM, 2026-12-02). Only on a cache
    that holds text: a prompt keeps transformers' own arithmetic, as plain decoding's prefill does."""
    rows, first_kept = [], len(token_ids) - keep
    for start in range(0, len(token_ids), small_matmul.MAX_ROWS):
        chunk = token_ids[start : start + small_matmul.MAX_ROWS]
        wanted = min(len(chunk), start + len(chunk) - first_kept)  # this chunk's rows among the last `keep`
        logits = fused_step.forward(fused, plan.embed, plan.rope, chunk, cache, max(wanted, 1))
        if wanted > 0:
            rows.append(logits)
    return torch.cat(rows)


def few_tokens_step(model, token_ids: list[int], cache, keep: int = 1) -> torch.Tensor:
    """`forward_step` with `few_tokens_logits` where `supports` says yes."""
    if _plan(model) is not None:
        return few_tokens_logits(model, token_ids, cache, keep)
    return forward_step(model, token_ids, cache, keep)


def _qkv_sizes(layer: _Layer) -> list[int]:
    return [layer.q.weight.shape[0], layer.k.weight.shape[0], layer.v.weight.shape[0]]


def _few_rows(projection: _Projection, h: torch.Tensor) -> torch.Tensor:
    return small_matmul.linear(h, projection.weight)


def _tokens(plan: _Plan, token_ids: list[int], cache, keep: int, few_rows: bool = False) -> torch.Tensor:
    """Any number of tokens, transformers' operations in its order: F.linear, and for several
    tokens its causal mask (none from an empty cache, where sdpa's own causal flag does it). With `few_rows` (float32
    weights, at most `small_matmul.MAX_ROWS` tokens) every product goes through the few-rows kernel instead."""
    project = _few_rows if few_rows else _Projection.linear
    n, past = len(token_ids), cache.get_seq_length()
    x = F.embedding(torch.tensor([token_ids], dtype=torch.long), plan.embed)  # [1, n, hidden]
    cos, signed_sin = plan.rope.rows(past, n)
    cos, signed_sin = cos.view(1, 1, n, -1), signed_sin.view(1, 1, n, -1)  # broadcast over heads
    # transformers' sdpa mask: position past + i sees keys 0 .. past + i (True = attend).
    mask = None
    if n > 1 and past > 0:
        mask = (torch.arange(past + n) <= torch.arange(past, past + n).unsqueeze(-1)).view(1, 1, n, past + n)
    rotated = plan.rotated
    for index, layer in enumerate(plan.layers):
        head_dim = layer.head_dim
        h = _rms_norm(x, layer.input_norm, layer.eps)
        if few_rows and layer.qkv is not None:  # one kernel call: each output is its own row's sum either way
            q, k, v = small_matmul.linear(h, layer.qkv).split(_qkv_sizes(layer), dim=-1)
        else:
            q, k, v = project(layer.q, h), project(layer.k, h), project(layer.v, h)
        q = q.view(1, n, -1, head_dim).transpose(1, 2)
        k = k.view(1, n, -1, head_dim).transpose(1, 2)
        v = v.view(1, n, -1, head_dim).transpose(1, 2)
        q = q * cos + q.index_select(-1, rotated) * signed_sin
        k = k * cos + k.index_select(-1, rotated) * signed_sin
        k, v = cache.update(k, v, index)
        if mask is None:  # one token, or a causal block from an empty cache: sdpa's own GQA
            attended = F.scaled_dot_product_attention(
                q, k, v, scale=layer.scaling, is_causal=n > 1, enable_gqa=layer.grouped
            )
        else:  # transformers repeats K/V heads when it passes a mask
            if layer.grouped:
                k, v = _repeat_kv(k, layer.groups), _repeat_kv(v, layer.groups)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=layer.scaling)
        x = x + project(layer.o, attended.transpose(1, 2).reshape(1, n, -1))
        h = _rms_norm(x, layer.post_norm, layer.eps)
        if few_rows and layer.gate_up is not None:
            gate, up = small_matmul.linear(h, layer.gate_up).split(layer.gate.weight.shape[0], dim=-1)
        else:
            gate, up = project(layer.gate, h), project(layer.up, h)
        x = x + project(layer.down, F.silu(gate) * up)
    final = _rms_norm(x[:, n - keep :], plan.final_norm, plan.final_eps)
    return project(plan.lm_head, final)[0]
