"""A forward pass of 1 to 8 tokens of a float32 Llama in one C call (`fused_step.c`): the decode step of every page,
the speculative verify pass, and the draft's catch-up.

Why: through torch, the bundled model's decode step is ~190 operator calls whose dispatch costs more than their
arithmetic; `fused_step.c` runs the same arithmetic with none (measured in `fast_decode`'s docstring). Its products
are `small_matmul.c`'s kernels; both are one library, built on first use.

The C pass reads each layer's past keys and values in place and returns the new tokens' keys and values. `forward`
works on transformers' `DynamicCache` (`cache.update` appends them, as transformers' forward would);
`inference.core.fixed_cache` calls `call` on a block allocated once and writes them into it, the same numbers. Logits and
cache agree with `model(...)` to float rounding (the order of additions in sums; tests: within 1e-4, the same argmax).

Used only where `fast_decode._Plan.fused_for` says so: a float32 model whose q/k/v and gate/up weights are stacked, a cache whose
layers are all float32 `DynamicLayer`s, the library built, and `INFERENCE_LAB_FUSED_STEP` not "0". Elsewhere
`inference.core.fast_decode` keeps its torch paths.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicLayer

from inference.core import small_matmul


class _Shape(ctypes.Structure):
    """fused_step.c's `Shape`, field for field."""

    _fields_ = [
        (name, ctypes.c_int64)
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
    ] + [(name, ctypes.c_float) for name in ("eps", "final_eps", "scaling")]


@dataclass(frozen=True)
class FusedPlan:
    """A model's weights as fused_step.c reads them: one array of pointers, made once. The tensors behind them are
    the model's norms and this plan's packed copies of every product's weight (panels of 16 outputs,
    `small_matmul.pack`: the bundled model's 23 MB once more); it keeps the model's ones only to check they have not
    moved (and is dropped with the model, as the `_Plan` is)."""

    shape: _Shape
    weights: ctypes.Array
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    pointers: type  # ctypes array types of `layers` pointers and strides, made once
    strides: type
    borrowed: tuple  # the model's own tensors behind `weights` (norms; o, down, output layer packed from them), and
    borrowed_at: tuple  # where their memory was when `weights` was made
    packed: tuple  # every product's weight packed in panels (`small_matmul.pack`): this plan's own copies

    def still_valid(self) -> bool:
        """False once the model's tensors moved (a `model.to(...)` swaps a parameter's memory in place): C would
        read freed memory. Models are never changed here; this makes a wrong caller fall back to torch, not crash."""
        return all(t.data_ptr() == at for t, at in zip(self.borrowed, self.borrowed_at))

    @property
    def shape_ref(self):
        return ctypes.byref(self.shape)


def usable() -> bool:
    """The library is built (and not switched off since the plan was made) and INFERENCE_LAB_FUSED_STEP is not "0"."""
    return os.environ.get("INFERENCE_LAB_FUSED_STEP", "1") != "0" and small_matmul.available()


def make(plan) -> FusedPlan | None:
    """The fused plan for `fast_decode`'s `_Plan`, or None where fused_step.c cannot compute it exactly."""
    layers = plan.layers
    if not (plan.float32 and layers and small_matmul.available()):
        return None
    first = layers[0]

    def sizes(layer):
        return layer.heads, layer.kv_heads, layer.head_dim, layer.eps, layer.scaling

    same = all(sizes(layer) == sizes(first) for layer in layers)
    tensors = [plan.final_norm, plan.lm_head.weight, plan.embed]
    for layer in layers:
        tensors += [layer.input_norm, layer.post_norm, layer.o.weight, layer.down.weight]
    if (
        not same
        or first.head_dim % 2
        or first.heads % first.kv_heads
        or any(layer.qkv is None or layer.gate_up is None for layer in layers)
        or any(t.dtype != torch.float32 or not t.is_contiguous() for t in tensors)
    ):
        return None
    pointers, packed = [], []
    for layer in layers:  # fused_step.c's order: INPUT_NORM, QKV, O, POST_NORM, GATE_UP, DOWN
        products = [small_matmul.pack(w) for w in (layer.qkv, layer.o.weight, layer.gate_up, layer.down.weight)]
        packed += products
        for tensor in (layer.input_norm, products[0], products[1], layer.post_norm, products[2], products[3]):
            pointers.append(tensor.data_ptr())
    packed.append(small_matmul.pack(plan.lm_head.weight))
    pointers += [plan.final_norm.data_ptr(), packed[-1].data_ptr()]
    borrowed = tuple(tensors)  # the model's tensors: norms read in place, the products' weights packed from them
    shape = _Shape(
        layers=len(layers),
        hidden=plan.embed.shape[1],
        heads=first.heads,
        kv_heads=first.kv_heads,
        head_dim=first.head_dim,
        intermediate=first.gate.weight.shape[0],
        vocab=plan.lm_head.weight.shape[0],
        eps=first.eps,
        final_eps=plan.final_eps,
        scaling=first.scaling,
    )
    return FusedPlan(
        shape=shape,
        weights=(ctypes.c_void_p * len(pointers))(*pointers),
        layers=len(layers),
        kv_heads=first.kv_heads,
        head_dim=first.head_dim,
        vocab=shape.vocab,
        pointers=ctypes.c_void_p * len(layers),
        strides=ctypes.c_int64 * len(layers),
        borrowed=borrowed,
        borrowed_at=tuple(t.data_ptr() for t in borrowed),
        packed=tuple(packed),
    )


def with_output_rows(fused: FusedPlan, lm_head_weight: torch.Tensor, rows: torch.Tensor) -> FusedPlan:
    """The same pass whose output layer scores only the vocabulary rows `rows` (ids, [k]): logits [keep, k], each
    equal bit for bit to the full pass's logit of that id (a packed product sums every output alone, in the same
    order, whatever the outputs beside it; tests). The layers' packed weights are shared with `fused`; only the
    output layer's k rows are packed anew. A speculative draft that proposes from the most frequent tokens only
    (`inference.lessons.speculative.shortlist`) runs on this."""
    packed_rows = small_matmul.pack(lm_head_weight.index_select(0, rows))
    pointers = list(fused.weights)
    pointers[-1] = packed_rows.data_ptr()  # fused_step.c reads the output layer's weight last
    shape = _Shape.from_buffer_copy(fused.shape)
    shape.vocab = int(rows.numel())
    return dataclasses.replace(
        fused,
        shape=shape,
        weights=(ctypes.c_void_p * len(pointers))(*pointers),
        vocab=shape.vocab,
        packed=fused.packed + (packed_rows,),
    )


def takes_cache(cache, layers: int) -> bool:
    """A DynamicCache of plain float32 layers (what `cache.update` then does is a concatenation)."""
    cache_layers = getattr(cache, "layers", None)
    if cache_layers is None or len(cache_layers) != layers:
        return False
    for layer in cache_layers:
        if type(layer) is not DynamicLayer:
            return False
        if layer.is_initialized and layer.keys.numel() and layer.keys.dtype != torch.float32:
            return False
    return True


def _past(tensor: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, int]:
    """The layer's [1, kv_heads, past, head_dim] keys or values as fused_step.c walks them (rows of head_dim), and
    the floats between one K/V head and the next. A cropped cache is a strided view: copied then."""
    if tensor.stride(-1) != 1 or tensor.stride(-2) != head_dim:
        tensor = tensor.contiguous()
    return tensor, tensor.stride(1)


def forward(fused: FusedPlan, embed: torch.Tensor, rope, token_ids: list[int], cache, keep: int) -> torch.Tensor:
    """Feed `token_ids` (1 to `small_matmul.MAX_ROWS`) after `cache` (appended to, as transformers does); the last `keep`
    positions' logits, [keep, vocab]. Every Python line here runs once or twice a token: a draft model's whole C
    pass takes ~55 us, so each microsecond of this shows."""
    n = len(token_ids)
    past = cache.get_seq_length()
    embedded = embed[token_ids] if n > 1 else embed[token_ids[0]]
    cos, signed_sin = rope.rows(past, n)
    layers = fused.layers
    past_k, past_v, strides = fused.pointers(), fused.pointers(), fused.strides()
    held = []  # the past tensors stay alive during the call
    if past:
        for index, layer in enumerate(cache.layers):
            keys, stride = _past(layer.keys, fused.head_dim)
            values, v_stride = _past(layer.values, fused.head_dim)
            if stride != v_stride:
                keys, values = keys.contiguous(), values.contiguous()
                stride = keys.stride(1)
            held += [keys, values]
            past_k[index], past_v[index], strides[index] = keys.data_ptr(), values.data_ptr(), stride
    # [layers, kv_heads, n, head_dim]: each layer's rows are the [1, kv_heads, n, head_dim] the cache appends
    new_k = torch.empty(layers, 1, fused.kv_heads, n, fused.head_dim)
    new_v = torch.empty(layers, 1, fused.kv_heads, n, fused.head_dim)
    logits = call(
        fused,
        embedded.data_ptr(),
        n,
        past,
        cos,
        signed_sin,
        (past_k, past_v, strides),
        (new_k.data_ptr(), new_v.data_ptr()),
        keep,
    )
    for index in range(layers):
        cache.update(new_k[index], new_v[index], index)
    return logits


def call(fused: FusedPlan, embedded: int, n: int, past: int, cos, signed_sin, past_kv: tuple, new_kv: tuple, keep: int):
    """The C pass itself: `n` embedded rows at address `embedded` after `past` cached positions, whose keys and values
    `past_kv` points to (per-layer pointer arrays and strides); the new positions' keys and values written at the
    addresses `new_kv` (each [layers, kv_heads, n, head_dim]); the last `keep` positions' logits, [keep, vocab]."""
    logits = torch.empty(keep, fused.vocab)
    status = small_matmul.library().fused_step(
        fused.shape_ref,
        fused.weights,
        embedded,
        n,
        past,
        cos.data_ptr(),
        signed_sin.data_ptr(),
        *past_kv,
        *new_kv,
        keep,
        logits.data_ptr(),
    )
    if status != 0:
        raise RuntimeError(f"fused_step failed ({status}) for {n} tokens, keep {keep}")
    return logits
