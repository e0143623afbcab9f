"""Memory arithmetic for LLM inference: KV-cache size and weight size.

Plain Python and pandas, no Streamlit. Every size in a table is in **GB = 10**9
bytes** (decimal gigabytes, the unit accelerator memory is sold in); columns end in
``_gb``. ``GIB`` is provided for anyone who wants binary gibibytes instead.

The KV cache formula for standard attention (MHA or GQA) is::

    bytes = 2 (K and V) x layers x kv_heads x head_dim x tokens x batch x bytes_per_element

Models that use Multi-head Latent Attention (DeepSeek-V3, ``"attention": "MLA"`` in
``assets/public_models.json``) cache one compressed latent per token and layer
instead, of ``kv_lora_rank + qk_rope_head_dim`` values; ``model_kv_cache_bytes``
handles that case.
"""
from __future__ import annotations

import json
import math
import numbers
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from inference.paths import PUBLIC_MODELS_FILE

GB = 10**9
"""One gigabyte (decimal). All ``*_gb`` columns use this."""
GIB = 2**30
"""One gibibyte (binary), for reference only."""

BYTES_PER_ELEMENT: dict[str, float] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8": 1,
    "int8": 1,
    "int4": 0.5,
}
"""Bytes one stored number takes, per precision name."""

DEFAULT_BITS = (32, 16, 8, 4)
DEFAULT_ACCELERATOR_GB = (16, 24, 40, 80, 141)

REQUIRED_MODEL_FIELDS = (
    "name",
    "hub_id",
    "parameters",
    "active_parameters",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "hidden_size",
    "context",
    "vocab_size",
    "experts",
    "experts_per_token",
    "source",
    "notes",
)
_POSITIVE_INT_FIELDS = (
    "parameters",
    "active_parameters",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "hidden_size",
    "context",
    "vocab_size",
)
_MLA_FIELDS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


# --------------------------------------------------------------------------- checks


def _positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int, or raise ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return int(value)


def _positive_number(name: str, value: Any) -> Fraction:
    """Return ``value`` as an exact Fraction, or raise ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return Fraction(value)


def resolve_bytes_per_element(precision: str | float | int) -> float:
    """Bytes per stored number for a precision name (see BYTES_PER_ELEMENT) or a number."""
    if isinstance(precision, str):
        if precision not in BYTES_PER_ELEMENT:
            raise ValueError(
                f"precision must be one of {sorted(BYTES_PER_ELEMENT)}, got {precision!r}"
            )
        return BYTES_PER_ELEMENT[precision]
    return float(_positive_number("bytes_per_element", precision))


def _bytes(name_value_pairs: Iterable[tuple[str, Any]], bytes_per_element: Any) -> int:
    """Exact product of positive whole counts times bytes per element, rounded up to whole bytes."""
    count = 1
    for name, value in name_value_pairs:
        count *= _positive_int(name, value)
    if isinstance(bytes_per_element, str):
        bytes_per_element = resolve_bytes_per_element(bytes_per_element)
    per_element = _positive_number("bytes_per_element", bytes_per_element)
    return math.ceil(count * per_element)


# ------------------------------------------------------------------------ formulas


def kv_cache_bytes(
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int,
    batch: int = 1,
    bytes_per_element: float | str = 2,
) -> int:
    """KV-cache size in bytes for standard (MHA/GQA) attention.

    ``2 x layers x kv_heads x head_dim x tokens x batch x bytes_per_element``: each
    layer stores one key and one value vector of ``head_dim`` numbers per K/V head
    for every token of every sequence in the batch. ``bytes_per_element`` may be a
    number (2 for bfloat16) or a name from ``BYTES_PER_ELEMENT``.

    Raises ValueError (naming the argument and its value) for a count that is not a
    positive whole number or a non-positive ``bytes_per_element``.
    """
    return _bytes(
        [
            ("factor", 2),
            ("layers", layers),
            ("kv_heads", kv_heads),
            ("head_dim", head_dim),
            ("tokens", tokens),
            ("batch", batch),
        ],
        bytes_per_element,
    )


def mla_kv_cache_bytes(
    layers: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    tokens: int,
    batch: int = 1,
    bytes_per_element: float | str = 2,
) -> int:
    """KV-cache size in bytes for Multi-head Latent Attention (DeepSeek-V2/V3).

    Each layer caches one compressed latent of ``kv_lora_rank`` numbers plus one
    shared RoPE key of ``qk_rope_head_dim`` numbers per token, with no separate K and
    V copies and no per-head copies:
    ``layers x (kv_lora_rank + qk_rope_head_dim) x tokens x batch x bytes_per_element``.
    """
    _positive_int("kv_lora_rank", kv_lora_rank)
    _positive_int("qk_rope_head_dim", qk_rope_head_dim)
    return _bytes(
        [
            ("layers", layers),
            ("latent_width", kv_lora_rank + qk_rope_head_dim),
            ("tokens", tokens),
            ("batch", batch),
        ],
        bytes_per_element,
    )


def weight_bytes(parameters: int, bits: float) -> int:
    """Bytes needed to store ``parameters`` weights at ``bits`` bits each (``parameters x bits / 8``).

    Rounded up to a whole byte. Ignores quantization overhead such as per-group scales.
    """
    count = _positive_int("parameters", parameters)
    width = _positive_number("bits", bits)
    return math.ceil(count * width / 8)


def bytes_to_gb(n_bytes: int | float) -> float:
    """Bytes to decimal gigabytes (GB = 10**9 bytes)."""
    return n_bytes / GB


# ---------------------------------------------------------------------- model data


def is_mla(model: Mapping[str, Any]) -> bool:
    """True when the model uses Multi-head Latent Attention, so the standard formula does not apply."""
    return model.get("attention") == "MLA"


def model_kv_cache_bytes(
    model: Mapping[str, Any], tokens: int, batch: int = 1, bytes_per_element: float | str = 2
) -> int:
    """KV-cache bytes for one model entry, with the formula that fits its attention (MHA/GQA or MLA).

    Assumes every layer caches every token: sliding-window layers (Mistral-7B-v0.1,
    Gemma-2) really store less beyond their window; see each entry's ``notes``.
    """
    if is_mla(model):
        mla = model["mla"]
        return mla_kv_cache_bytes(
            model["layers"], mla["kv_lora_rank"], mla["qk_rope_head_dim"], tokens, batch,
            bytes_per_element,
        )
    return kv_cache_bytes(
        model["layers"], model["kv_heads"], model["head_dim"], tokens, batch, bytes_per_element
    )


def model_kv_cache_bytes_without_gqa(
    model: Mapping[str, Any], tokens: int, batch: int = 1, bytes_per_element: float | str = 2
) -> int:
    """KV-cache bytes if every query head had its own K and V head (plain multi-head attention).

    For GQA this sets kv_heads = attention_heads. For MLA it is the uncompressed
    per-head cache: keys of ``qk_nope_head_dim + qk_rope_head_dim`` and values of
    ``v_head_dim`` numbers for every head.
    """
    if is_mla(model):
        mla = model["mla"]
        per_head = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"] + mla["v_head_dim"]
        return _bytes(
            [
                ("layers", model["layers"]),
                ("attention_heads", model["attention_heads"]),
                ("key_plus_value_width", per_head),
                ("tokens", tokens),
                ("batch", batch),
            ],
            bytes_per_element,
        )
    return kv_cache_bytes(
        model["layers"], model["attention_heads"], model["head_dim"], tokens, batch,
        bytes_per_element,
    )


def validate_model(model: Mapping[str, Any]) -> dict[str, Any]:
    """Check one model entry has every field the calculators need; return it as a dict.

    Raises ValueError naming the model and the bad field.
    """
    if not isinstance(model, Mapping):
        raise ValueError(f"model entry must be an object, got {model!r}")
    label = model.get("name", "<unnamed>")
    missing = [f for f in REQUIRED_MODEL_FIELDS if f not in model]
    if missing:
        raise ValueError(f"model {label!r} is missing field(s) {missing}")
    for field in _POSITIVE_INT_FIELDS:
        try:
            _positive_int(field, model[field])
        except ValueError as exc:
            raise ValueError(f"model {label!r}: {exc}") from None
    if model["active_parameters"] > model["parameters"]:
        raise ValueError(
            f"model {label!r}: active_parameters {model['active_parameters']} exceeds "
            f"parameters {model['parameters']}"
        )
    if model["attention_heads"] % model["kv_heads"] != 0:
        raise ValueError(
            f"model {label!r}: attention_heads {model['attention_heads']} is not a multiple "
            f"of kv_heads {model['kv_heads']}"
        )
    experts, per_token = model["experts"], model["experts_per_token"]
    if (experts is None) != (per_token is None):
        raise ValueError(
            f"model {label!r}: experts ({experts!r}) and experts_per_token ({per_token!r}) "
            "must both be null (dense) or both set (MoE)"
        )
    if experts is None:
        if model["active_parameters"] != model["parameters"]:
            raise ValueError(
                f"model {label!r}: a dense model needs active_parameters == parameters"
            )
    else:
        try:
            _positive_int("experts", experts)
            _positive_int("experts_per_token", per_token)
        except ValueError as exc:
            raise ValueError(f"model {label!r}: {exc}") from None
        if per_token > experts:
            raise ValueError(
                f"model {label!r}: experts_per_token {per_token} exceeds experts {experts}"
            )
    if is_mla(model):
        mla = model.get("mla")
        if not isinstance(mla, Mapping) or any(f not in mla for f in _MLA_FIELDS):
            raise ValueError(f"model {label!r}: attention 'MLA' needs an 'mla' object with {_MLA_FIELDS}")
        for field in _MLA_FIELDS:
            try:
                _positive_int(field, mla[field])
            except ValueError as exc:
                raise ValueError(f"model {label!r}: {exc}") from None
    return dict(model)


def load_public_models(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read and validate the public model list (``assets/public_models.json`` by default)."""
    file = Path(path) if path is not None else PUBLIC_MODELS_FILE
    with open(file, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, list):
        raise ValueError(f"{file} must hold a JSON list of models, got {type(data).__name__}")
    models = [validate_model(entry) for entry in data]
    names = [m["name"] for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{file} has duplicate model names: {duplicates}")
    return models


def model_entry_from_hf_config(
    config: Mapping[str, Any], name: str, parameters: int, hub_id: str = "", notes: str = ""
) -> dict[str, Any]:
    """Build a dense-model entry (same fields as public_models.json) from a Hugging Face config dict.

    Intended for the bundled model: pass its config.json contents and its counted
    parameters. Understands Llama-style keys (``num_hidden_layers``, ...) and GPT-2
    keys (``n_layer``, ``n_head``, ``n_embd``, ``n_positions``).
    """
    def pick(*keys: str) -> Any:
        for key in keys:
            if config.get(key) is not None:
                return config[key]
        raise ValueError(f"config for {name!r} has none of the keys {keys}")

    heads = pick("num_attention_heads", "n_head")
    hidden = pick("hidden_size", "n_embd", "d_model")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    entry = {
        "name": name,
        "hub_id": hub_id,
        "parameters": parameters,
        "active_parameters": parameters,
        "layers": pick("num_hidden_layers", "n_layer"),
        "attention_heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": hidden,
        "context": pick("max_position_embeddings", "n_positions", "n_ctx"),
        "vocab_size": pick("vocab_size"),
        "experts": None,
        "experts_per_token": None,
        "attention": "MHA" if kv_heads == heads else "GQA",
        "sliding_window": config.get("sliding_window"),
        "mla": None,
        "source": {"config_json": "bundled config.json", "parameter_count": "counted from the loaded weights"},
        "notes": notes,
    }
    return validate_model(entry)


# -------------------------------------------------------------------------- tables


def kv_table(
    models: Sequence[Mapping[str, Any]],
    context: int,
    batch: int = 1,
    precision: str = "bfloat16",
) -> pd.DataFrame:
    """KV cache and weight memory per model at ``context`` tokens x ``batch`` sequences.

    All sizes are in GB = 10**9 bytes. Columns:

    - ``model``, ``attention`` (MHA / GQA / MLA), ``attention_heads``, ``kv_heads``
    - ``kv_gb``: KV cache with the model's real K/V head count (MLA: compressed latent)
    - ``kv_gb_without_gqa``: the same if every query head had its own K/V head
    - ``gqa_saving``: ``kv_gb_without_gqa / kv_gb``. For GQA this is attention_heads / kv_heads; 1.0 for MHA
    - ``weight_gb``: all parameters at the same precision (MoE: every expert, since all must be resident)
    - ``kv_per_token_mb``: KV bytes added by one more token of one sequence, in MB (10**6 bytes)
    - ``exceeds_context``: True when ``context`` is beyond the model's maximum positions

    The KV and weight columns both use ``precision`` (a name in BYTES_PER_ELEMENT).
    Sliding-window layers are treated as full layers (see each model's notes).
    """
    tokens = _positive_int("context", context)
    batch = _positive_int("batch", batch)
    bpe = resolve_bytes_per_element(precision)
    bits = bpe * 8
    rows = []
    for model in models:
        model = validate_model(model)
        kv = model_kv_cache_bytes(model, tokens, batch, bpe)
        kv_full = model_kv_cache_bytes_without_gqa(model, tokens, batch, bpe)
        per_token = model_kv_cache_bytes(model, 1, 1, bpe)
        rows.append(
            {
                "model": model["name"],
                "attention": model.get("attention")
                or ("MHA" if model["kv_heads"] == model["attention_heads"] else "GQA"),
                "attention_heads": model["attention_heads"],
                "kv_heads": model["kv_heads"],
                "kv_gb": bytes_to_gb(kv),
                "kv_gb_without_gqa": bytes_to_gb(kv_full),
                "gqa_saving": kv_full / kv,
                "weight_gb": bytes_to_gb(weight_bytes(model["parameters"], bits)),
                "kv_per_token_mb": per_token / 10**6,
                "exceeds_context": tokens > model["context"],
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "model", "attention", "attention_heads", "kv_heads", "kv_gb", "kv_gb_without_gqa",
            "gqa_saving", "weight_gb", "kv_per_token_mb", "exceeds_context",
        ],
    )


def weight_fit_table(
    models: Sequence[Mapping[str, Any]],
    bits_list: Sequence[float] = DEFAULT_BITS,
    accelerator_gb: Sequence[float] = DEFAULT_ACCELERATOR_GB,
) -> pd.DataFrame:
    """Weight memory per model and bit width, and the smallest listed accelerator it fits on.

    Weights only: real serving also needs memory for the KV cache (see ``kv_table``),
    activations, and runtime overhead (CUDA context, fragmentation), so a model that
    "fits" here with little headroom will not serve in practice. Accelerator sizes and
    weights are both in GB = 10**9 bytes. For MoE models every expert counts, because all
    of them must be in memory even though only a few run per token.

    Columns: ``model``, ``bits``, ``parameters``, ``weight_gb``, ``fits_in_gb`` (the smallest
    listed accelerator memory >= weight_gb, or <NA> if none), ``fits_on_one`` (bool) and
    ``largest_needed`` (how many of the largest listed accelerators the weights need).
    """
    if not bits_list:
        raise ValueError(f"bits_list must not be empty, got {bits_list!r}")
    if not accelerator_gb:
        raise ValueError(f"accelerator_gb must not be empty, got {accelerator_gb!r}")
    for bits in bits_list:
        _positive_number("bits", bits)
    for size in accelerator_gb:
        _positive_number("accelerator_gb", size)
    sizes = sorted(accelerator_gb)
    largest = sizes[-1]
    rows = []
    for model in models:
        model = validate_model(model)
        for bits in bits_list:
            n_bytes = weight_bytes(model["parameters"], bits)
            fits = next((size for size in sizes if n_bytes <= size * GB), None)
            rows.append(
                {
                    "model": model["name"],
                    "bits": bits,
                    "parameters": model["parameters"],
                    "weight_gb": bytes_to_gb(n_bytes),
                    "fits_in_gb": fits,
                    "fits_on_one": fits is not None,
                    "largest_needed": math.ceil(n_bytes / (largest * GB)),
                }
            )
    table = pd.DataFrame(
        rows,
        columns=["model", "bits", "parameters", "weight_gb", "fits_in_gb", "fits_on_one", "largest_needed"],
    )
    if all(float(s).is_integer() for s in sizes):
        table["fits_in_gb"] = table["fits_in_gb"].astype("Int64")
    return table
