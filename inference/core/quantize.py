"""Quantized copies of a model, their real size in bytes, and how far their outputs drift.

    copy = quantized_copy(model, "int4")          # a new model; `model` is never touched
    weight_bytes(copy.model)                       # bytes of the tensors actually held
    ref = teacher_forced_logits(model, ids)        # [T, vocab] float32, one forward pass
    table = compare_to_reference(ref, teacher_forced_logits(copy.model, ids), ids[1:] + [next_id])

Precisions: float32 (the reference), bfloat16 (a cast), int8 (torchao weight-only, one
scale per output row) and int4 (torchao group-wise weight-only, CPU-packed layout). Both
integer formats start from a bfloat16 copy: torchao's int4 CPU kernel wants bf16
activations, and embeddings are never quantized, so starting from bf16 halves them too.

Only `nn.Linear` layers are quantized. Every linear-like layer that is left alone is listed
in `QuantizedModel.skipped_layers` with the reason, because torchao skips some silently.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from transformers.pytorch_utils import Conv1D

from inference.core.forward import TransformersForward
from inference.core.measuring import ms_since, now

PRECISIONS = ("float32", "bfloat16", "int8", "int4")
INT4_GROUP_SIZES = (32, 64, 128)  # what torchao's CPU int4 packing accepts
INT4_OUT_FEATURES_MULTIPLE = 16  # `_convert_weight_to_int4pack_for_cpu` raises otherwise


@dataclass(frozen=True)
class SkippedLayer:
    name: str  # module name, e.g. "transformer.h.0.attn.c_attn"
    reason: str


@dataclass
class QuantizedModel:
    model: nn.Module  # a new model: the input model is left unchanged
    precision: str
    seconds: float  # time to copy and convert
    quantized_linear_layers: int
    skipped_layers: list[SkippedLayer] = field(default_factory=list)


def _is_conv1d(module: nn.Module) -> bool:
    return isinstance(module, Conv1D)  # GPT-2's linear layer with a transposed weight


def _import_torchao():
    """Import torchao lazily, hiding its harmless import-time warnings on a CPU machine
    ("Failed to load _C_mxfp8" for CUDA-only libraries, a torch pytree deprecation)."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        import torchao  # noqa: F401
        from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
        from torchao.utils import TorchAOBaseTensor
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
    return quantize_, Int8WeightOnlyConfig, PrototypeInt4WeightOnlyConfig, TorchAOBaseTensor


def is_quantized_tensor(tensor: torch.Tensor) -> bool:
    """True for torchao's quantized tensor subclasses (Int8Tensor, Int4OpaqueTensor, ...)."""
    *_, torchao_base = _import_torchao()
    return isinstance(tensor, torchao_base)


def _shared_parameter_owners(model: nn.Module) -> dict[int, list[str]]:
    """id(parameter) -> names of the modules holding it: two or more means tied weights."""
    owners: dict[int, list[str]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for param in module.parameters(recurse=False):
            owners.setdefault(id(param), []).append(module_name)
    return owners


def _cast_parameters(model: nn.Module, dtype: torch.dtype) -> None:
    """Cast the parameters only. `model.to(dtype)` would also round buffers such as RoPE's
    `inv_freq` to bf16, which `from_pretrained(dtype=torch.bfloat16)` does not do."""
    for param in model.parameters():  # a tied parameter is one object, visited once
        param.data = param.data.to(dtype)


def _conv1d_to_linear(model: nn.Module) -> int:
    """Replace every GPT-2 Conv1D with the equivalent nn.Linear (weight transposed)."""
    replaced = 0
    for name, module in list(model.named_modules()):
        if not _is_conv1d(module):
            continue
        in_features, out_features = module.weight.shape  # Conv1D stores [in, out]
        linear = nn.Linear(
            in_features,
            out_features,
            bias=module.bias is not None,
            dtype=module.weight.dtype,
            device=module.weight.device,
        )
        with torch.no_grad():
            linear.weight.copy_(module.weight.t())
            if module.bias is not None:
                linear.bias.copy_(module.bias)
        parent_name, _, child_name = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child_name, linear)
        replaced += 1
    return replaced


def _plan_layers(model: nn.Module, precision: str, group_size: int) -> tuple[set[str], list[SkippedLayer]]:
    """Which layers to quantize, and every linear-like layer left alone with the reason."""
    owners = _shared_parameter_owners(model)
    chosen: set[str] = set()
    skipped: list[SkippedLayer] = []
    for name, module in model.named_modules():
        if any(p.dim() == 3 for p in module.parameters(recurse=False)):
            skipped.append(
                SkippedLayer(
                    name,
                    "Mixture-of-Experts experts: each projection is one 3-D weight "
                    "[experts, out, in], not an nn.Linear, and torchao's weight-only configs "
                    "here convert nn.Linear only, so the experts stay bf16",
                )
            )
            continue
        if _is_conv1d(module):
            skipped.append(SkippedLayer(name, "Conv1D (GPT-2) is not nn.Linear; torchao only converts nn.Linear"))
            continue
        if not isinstance(module, nn.Linear):
            continue
        shared_with = [other for other in owners[id(module.weight)] if other != name]
        if shared_with:
            skipped.append(
                SkippedLayer(
                    name,
                    f"tied lm_head: weight shared with {shared_with[0]}; quantizing it alone "
                    "would break the tie and store a second copy",
                )
            )
            continue
        if precision == "int4":
            if module.in_features % group_size != 0:
                skipped.append(
                    SkippedLayer(name, f"input width {module.in_features} not divisible by group size {group_size}")
                )
                continue
            if module.out_features % INT4_OUT_FEATURES_MULTIPLE != 0:
                skipped.append(
                    SkippedLayer(
                        name,
                        f"output width {module.out_features} not divisible by "
                        f"{INT4_OUT_FEATURES_MULTIPLE} (torchao's CPU int4 packing needs it)",
                    )
                )
                continue
        chosen.add(name)
    return chosen, skipped


def quantized_copy(
    model: nn.Module, precision: str, group_size: int = 128, convert_conv1d: bool = False
) -> QuantizedModel:
    """A converted deep copy of `model`; `model` itself is left bit-for-bit unchanged.

    int8: torchao `Int8WeightOnlyConfig` (per output row) on a bf16 copy.
    int4: torchao `PrototypeInt4WeightOnlyConfig(group_size)` (CPU-packed) on a bf16 copy.
    `convert_conv1d=True` first turns GPT-2's Conv1D layers into nn.Linear so they can be
    quantized; by default they are kept and reported as skipped.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}, but is {precision!r}")
    if precision == "int4" and group_size not in INT4_GROUP_SIZES:
        raise ValueError(f"`group_size` must be one of {INT4_GROUP_SIZES} for int4, but is {group_size}")

    start = now()
    new = copy.deepcopy(model)  # deepcopy keeps tied parameters tied
    new.eval()
    if convert_conv1d:
        _conv1d_to_linear(new)
    _cast_parameters(new, torch.float32 if precision == "float32" else torch.bfloat16)

    quantized = 0
    skipped: list[SkippedLayer] = []
    if precision in ("int8", "int4"):
        quantize_, int8_config, int4_config, torchao_base = _import_torchao()
        chosen, skipped = _plan_layers(new, precision, group_size)
        # set_inductor_config=False: otherwise torchao edits global torch._inductor settings
        # for the whole process, and this process is shared by every user of the app.
        if precision == "int8":
            config = int8_config(set_inductor_config=False)
        else:
            config = int4_config(group_size=group_size, set_inductor_config=False)
        quantize_(new, config, filter_fn=lambda module, fqn: fqn in chosen)
        for name in sorted(chosen):  # torchao can skip a layer without a word: check each one
            if isinstance(new.get_submodule(name).weight, torchao_base):
                quantized += 1
            else:
                skipped.append(SkippedLayer(name, "torchao left this layer unquantized"))
    return QuantizedModel(new, precision, ms_since(start) / 1000, quantized, skipped)


# ---------------------------------------------------------------------------- bytes


def tensor_parts(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors that hold a tensor's data: itself, or for a torchao subclass its
    components (qdata, scale, zero point, ...), found through `__tensor_flatten__`."""
    if not is_traceable_wrapper_subclass(tensor):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    parts: list[torch.Tensor] = []
    for name in names:
        parts.extend(tensor_parts(getattr(tensor, name)))
    return parts


def _storage_key_and_bytes(part: torch.Tensor) -> tuple[int, int]:
    # A wrapper subclass reports data_ptr() 0, so keys come from the plain parts only.
    storage = part.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def weight_bytes_by_kind(model: nn.Module) -> dict[str, int]:
    """Bytes of every parameter, by kind: "embeddings", "lm_head" (when not tied),
    "linear" (nn.Linear and GPT-2 Conv1D weights) and "other" (norms, biases).
    Measured from the tensors' storage; a tied or shared tensor is counted once."""
    output_embeddings = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    totals = {"embeddings": 0, "lm_head": 0, "linear": 0, "other": 0}
    seen: set[int] = set()
    # Embeddings first, so a tied lm_head weight is counted with the embeddings.
    modules = sorted(model.named_modules(), key=lambda item: not isinstance(item[1], nn.Embedding))
    for _, module in modules:
        for param_name, param in module.named_parameters(recurse=False):
            if isinstance(module, nn.Embedding):
                kind = "embeddings"
            elif module is output_embeddings and param_name == "weight":
                kind = "lm_head"
            elif (isinstance(module, nn.Linear) or _is_conv1d(module)) and param_name == "weight":
                kind = "linear"
            else:
                kind = "other"
            for part in tensor_parts(param):
                key, nbytes = _storage_key_and_bytes(part)
                if key not in seen:
                    seen.add(key)
                    totals[kind] += nbytes
    return totals


@dataclass(frozen=True)
class QuantizationOverhead:
    """Bytes of a copy's quantized weights: the integers, and what is stored beside them to undo the rounding."""

    value_bytes: int  # the integer weights (torchao's `qdata`)
    scale_bytes: int  # scales and zero points (every other component of the quantized tensors)

    @property
    def fraction(self) -> float:
        """Scales and zero points as a share of the integer bytes (int4, bf16 scale + zero per group g: 8 / g)."""
        return self.scale_bytes / self.value_bytes if self.value_bytes else 0.0


def quantization_overhead(model: nn.Module) -> QuantizationOverhead:
    """Read from the copy's own quantized tensors (storage bytes, shared storage once); zero for a plain model."""
    values = scales = 0
    seen: set[int] = set()
    for param in model.parameters():
        if not is_traceable_wrapper_subclass(param):
            continue
        names, _ = param.__tensor_flatten__()
        for name in names:
            for part in tensor_parts(getattr(param, name)):
                key, nbytes = _storage_key_and_bytes(part)
                if key in seen:
                    continue
                seen.add(key)
                if name == "qdata":
                    values += nbytes
                else:
                    scales += nbytes
    return QuantizationOverhead(values, scales)


def weight_bytes(model: nn.Module) -> int:
    """Bytes held by all parameters (quantized components included, shared ones once)."""
    return sum(weight_bytes_by_kind(model).values())


# ---------------------------------------------------------------------------- quality


def teacher_forced_logits(model: nn.Module, token_ids) -> torch.Tensor:
    """Logits at every position of `token_ids` in one forward pass: [T, vocab] float32.
    Row t is the model's prediction for the token after position t."""
    ids = [int(t) for t in token_ids]
    return TransformersForward(model, None).logits(ids, keep=len(ids))


def kl_divergence(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(P_ref || P) in nats for each row, from log-softmax in float64: [T]."""
    log_p = F.log_softmax(ref_logits.double(), dim=-1)
    log_q = F.log_softmax(logits.double(), dim=-1)
    p = log_p.exp()
    # where P_ref is 0 the term is 0 (avoids 0 * (-inf - -inf) = nan for masked logits)
    terms = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p))
    return terms.sum(dim=-1).clamp_min(0.0)  # tiny negative values are rounding


def compare_to_reference(ref_logits: torch.Tensor, logits: torch.Tensor, reference_tokens=None) -> pd.DataFrame:
    """Per step: how far this precision's next-token distribution is from the reference's.

    `ref_logits`, `logits`: [T, vocab] teacher-forced on the same tokens.
    `reference_tokens`: the token the reference chose after each position ([T]); by
    default the reference's own argmax.
    Columns: step, reference_token, kl_from_reference (nats), top1_agrees,
    p_reference_token (probability this precision gives the reference's token).
    """
    if ref_logits.shape != logits.shape or ref_logits.dim() != 2:
        raise ValueError(f"logits must both be [T, vocab], but are {tuple(ref_logits.shape)} and {tuple(logits.shape)}")
    if reference_tokens is None:
        reference_tokens = ref_logits.argmax(dim=-1)
    reference_tokens = torch.as_tensor(reference_tokens, dtype=torch.long).reshape(-1)
    if len(reference_tokens) != len(ref_logits):
        raise ValueError(
            f"`reference_tokens` needs one token per row ({len(ref_logits)}), but has {len(reference_tokens)}"
        )
    probs = F.softmax(logits.double(), dim=-1)
    return pd.DataFrame(
        {
            "step": range(len(ref_logits)),
            "reference_token": reference_tokens.tolist(),
            "kl_from_reference": kl_divergence(ref_logits, logits).tolist(),
            "top1_agrees": (logits.argmax(dim=-1) == ref_logits.argmax(dim=-1)).tolist(),
            "p_reference_token": probs[torch.arange(len(probs)), reference_tokens].tolist(),
        }
    )
