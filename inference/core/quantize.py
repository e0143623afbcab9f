"""Quantized copies of a model (torchao weight-only int8 / int4 on a bf16 copy), their real bytes, and the KL of
their next-token distributions from the reference. The model a copy is made from is never changed."""

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
    name: str  # module name, e.g. "model.layers.0.mlp.experts"
    reason: str


@dataclass
class QuantizedModel:
    model: nn.Module
    precision: str
    seconds: float  # time to copy and convert
    quantized_linear_layers: int
    skipped_layers: list[SkippedLayer] = field(default_factory=list)
    group_size: int = 0  # int4's inputs per scale and zero point


def _torchao():
    """torchao, imported lazily; its CPU import-time warnings (CUDA-only libraries, a pytree deprecation) hidden."""
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig
    from torchao.quantization import Int8WeightOnlyConfig, quantize_
    from torchao.utils import TorchAOBaseTensor

    return quantize_, Int8WeightOnlyConfig, PrototypeInt4WeightOnlyConfig, TorchAOBaseTensor


def is_quantized_tensor(tensor: torch.Tensor) -> bool:
    return isinstance(tensor, _torchao()[3])


def int4_group_size(model: nn.Module) -> int:
    """The largest group size that divides every linear layer's input width, so none is skipped for it."""
    widths = {m.in_features for m in model.modules() if isinstance(m, nn.Linear)}
    widths |= {m.weight.shape[0] for m in model.modules() if isinstance(m, Conv1D)}  # Conv1D stores [in, out]
    fitting = [size for size in INT4_GROUP_SIZES if all(width % size == 0 for width in widths)]
    return max(fitting, default=min(INT4_GROUP_SIZES))


def _conv1d_to_linear(model: nn.Module) -> None:
    """GPT-2's Conv1D is nn.Linear with the weight transposed; torchao converts only nn.Linear."""
    for name, module in list(model.named_modules()):
        if isinstance(module, Conv1D):
            linear = nn.Linear(*module.weight.shape, dtype=module.weight.dtype)
            with torch.no_grad():
                linear.weight.copy_(module.weight.t())
                linear.bias.copy_(module.bias)
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, linear)


def _plan_layers(model: nn.Module, precision: str, group_size: int) -> tuple[set[str], list[SkippedLayer]]:
    """The linear layers to quantize, and every one left alone with the reason (torchao skips some silently)."""
    owners: dict[int, list[str]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for param in module.parameters(recurse=False):
            owners.setdefault(id(param), []).append(module_name)
    chosen, skipped = set(), []
    for name, module in model.named_modules():
        reason = None
        if any(p.dim() == 3 for p in module.parameters(recurse=False)):
            reason = (
                "Mixture-of-Experts experts: each projection is one 3-D weight [experts, out, in], not an nn.Linear, "
                "and torchao's weight-only configs here convert nn.Linear only, so the experts stay bf16"
            )
        elif not isinstance(module, nn.Linear):
            continue
        elif shared := [other for other in owners[id(module.weight)] if other != name]:
            reason = f"tied lm_head: weight shared with {shared[0]}; quantizing it alone would store a second copy"
        elif precision == "int4" and module.in_features % group_size:
            reason = f"input width {module.in_features} not divisible by group size {group_size}"
        elif precision == "int4" and module.out_features % INT4_OUT_FEATURES_MULTIPLE:
            reason = f"output width {module.out_features} not divisible by {INT4_OUT_FEATURES_MULTIPLE} (int4 packing)"
        if reason:
            skipped.append(SkippedLayer(name, reason))
        else:
            chosen.add(name)
    return chosen, skipped


def quantized_copy(model: nn.Module, precision: str, group_size: int | None = None) -> QuantizedModel:
    """`model` at `precision`: float32 is the model itself (only ever called), the others converted deep copies
    (GPT-2's Conv1D layers turned into nn.Linear first). int8: one scale per output row; int4: a bf16 scale and
    zero per `group_size` inputs (by default the largest that divides every layer)."""
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}, but is {precision!r}")
    group_size = group_size or int4_group_size(model)
    if precision == "int4" and group_size not in INT4_GROUP_SIZES:
        raise ValueError(f"`group_size` must be one of {INT4_GROUP_SIZES} for int4, but is {group_size}")
    if precision == "float32":
        return QuantizedModel(model, precision, 0.0, 0, [], group_size)
    start = now()
    new = copy.deepcopy(model).eval()  # deepcopy keeps tied parameters tied
    _conv1d_to_linear(new)
    for param in new.parameters():  # parameters only: `.to()` would also round buffers such as RoPE's inv_freq
        param.data = param.data.to(torch.bfloat16)
    quantized, skipped = 0, []
    if precision in ("int8", "int4"):
        quantize_, int8_config, int4_config, torchao_tensor = _torchao()
        chosen, skipped = _plan_layers(new, precision, group_size)
        # set_inductor_config=False: otherwise torchao edits global inductor settings of this shared process
        if precision == "int8":
            config = int8_config(set_inductor_config=False)
        else:
            config = int4_config(group_size=group_size, set_inductor_config=False)
        quantize_(new, config, filter_fn=lambda module, fqn: fqn in chosen)
        for name in sorted(chosen):  # torchao can skip a layer without a word: check each one
            if isinstance(new.get_submodule(name).weight, torchao_tensor):
                quantized += 1
            else:
                skipped.append(SkippedLayer(name, "torchao left this layer unquantized"))
    return QuantizedModel(new, precision, ms_since(start) / 1000, quantized, skipped, group_size)


# -- bytes, read from the tensors' storage (a torchao tensor's components: qdata, scales, zero points) ---------


def tensor_parts(tensor: torch.Tensor, name: str = "") -> list[tuple[str, torch.Tensor]]:
    """(component, plain tensor) pairs holding a tensor's data: itself, or a torchao subclass's components."""
    if not is_traceable_wrapper_subclass(tensor):
        return [(name, tensor)]
    names, _ = tensor.__tensor_flatten__()
    return [part for n in names for part in tensor_parts(getattr(tensor, n), name or n)]


def _count(totals: dict, key: str, part: torch.Tensor, seen: set) -> None:
    storage = part.untyped_storage()  # a wrapper subclass reports data_ptr() 0: only plain parts are counted
    if storage.data_ptr() not in seen:
        seen.add(storage.data_ptr())
        totals[key] += storage.nbytes()


def weight_bytes_by_kind(model: nn.Module) -> dict[str, int]:
    """Bytes of every parameter by kind: embeddings, lm_head (when untied), linear weights, other; shared once."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    totals, seen = dict.fromkeys(("embeddings", "lm_head", "linear", "other"), 0), set()
    # Embeddings first, so a tied lm_head weight is counted with the embeddings.
    for _, module in sorted(model.named_modules(), key=lambda item: not isinstance(item[1], nn.Embedding)):
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, nn.Embedding):
                kind = "embeddings"
            elif name != "weight":
                kind = "other"
            else:
                kind = "lm_head" if module is head else "linear" if isinstance(module, (nn.Linear, Conv1D)) else "other"
            for _, part in tensor_parts(param):
                _count(totals, kind, part, seen)
    return totals


def weight_bytes(model: nn.Module) -> int:
    """Bytes held by all parameters (quantized components included, shared ones once)."""
    return sum(weight_bytes_by_kind(model).values())


@dataclass(frozen=True)
class QuantizationOverhead:
    value_bytes: int  # the integer weights (torchao's `qdata`)
    scale_bytes: int  # scales and zero points: every other component of the quantized tensors

    @property
    def fraction(self) -> float:
        """Scales and zero points over the integers (int4, a bf16 scale and zero per group of g: 8 / g)."""
        return self.scale_bytes / self.value_bytes if self.value_bytes else 0.0


def quantization_overhead(model: nn.Module) -> QuantizationOverhead:
    totals, seen = {"qdata": 0, "scales": 0}, set()
    for param in model.parameters():
        if is_traceable_wrapper_subclass(param):
            for name, part in tensor_parts(param):
                _count(totals, "qdata" if name == "qdata" else "scales", part, seen)
    return QuantizationOverhead(totals["qdata"], totals["scales"])


# -- drift from the reference ------------------------------------------------------------------------------


def teacher_forced_logits(model: nn.Module, token_ids) -> torch.Tensor:
    """[T, vocab] float32 from one forward pass: row t predicts the token after position t."""
    ids = [int(t) for t in token_ids]
    return TransformersForward(model, None).logits(ids, keep=len(ids))


def compare_to_reference(ref_logits: torch.Tensor, logits: torch.Tensor, reference_tokens) -> pd.DataFrame:
    """Per step of [T, vocab] logits teacher-forced on the same tokens: KL(reference ‖ this) in nats, whether the
    top tokens agree, and the probability this one gives the reference's token (`reference_tokens`, [T])."""
    log_p, log_q = F.log_softmax(ref_logits.double(), dim=-1), F.log_softmax(logits.double(), dim=-1)
    p = log_p.exp()
    kl = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1).clamp_min(0.0)  # 0 · log 0 = 0
    tokens = torch.as_tensor(reference_tokens, dtype=torch.long).reshape(-1)
    return pd.DataFrame(
        {
            "step": range(len(ref_logits)),
            "kl_from_reference": kl.tolist(),
            "top1_agrees": (logits.argmax(-1) == ref_logits.argmax(-1)).tolist(),
            "p_reference_token": log_q.exp()[torch.arange(len(tokens)), tokens].tolist(),
        }
    )
