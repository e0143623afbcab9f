"""A memory-bound model for timing: a public model's layers and widths, our vocabulary, random weights.

The bundled model is so small (23 MB in float32) that one decode pass is bound by fixed per-pass costs,
not by reading weights, so batching gains little on it. Real models read hundreds of MB to many GB of
weights per pass, once for every request in the batch: the effect providers live on. No weights can be
downloaded here, so this module builds a model with the layers and widths of a public model from
`assets/public_models.json` (e.g. SmolLM2-135M) and our 4,096-token vocabulary and tokenizer, with
weights drawn from a seeded generator. Its text is nonsense; its timing is real: **random weights,
timing only**.

The published configs list no MLP width, so it is solved from the published parameter count: a Llama
layer has q, k, v, o projections (hidden x heads x head_dim, twice hidden x kv_heads x head_dim), an MLP of
three hidden x width matrices and two norms; add the embedding (twice when the output layer is untied)
and the final norm. The width is taken only when the solve gives a whole multiple of 64, which also
tells tied from untied embeddings for the models listed (e.g. SmolLM2-135M: 1,536, tied).

Built on demand into `~/.cache/inference-lab/random-models/` (outside the repo), reused afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, PUBLIC_MODELS_FILE
from inference.engines import llamacpp

LABEL = "random weights, timing only"
DEFAULT_PUBLIC_MODEL = "SmolLM2-135M"
CACHE_ENV = "INFERENCE_LAB_RANDOM_MODELS_DIR"
DEFAULT_CACHE = Path.home() / ".cache" / "inference-lab" / "random-models"
CONTEXT = 1024  # positions the config allows: one llama-server slot (the traces need at most 464)
INIT_STD = 0.02  # the usual initialiser spread for Llama weights
MAX_FLOAT32_BYTES = 2_000_000_000  # builds stay seconds and fit in memory next to the app
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


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

    @property
    def slug(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in self.name.lower()).strip("-")

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
    """The Llama shape of a published dense model with our vocabulary, the MLP width solved from its published
    parameter count (module docstring). ValueError when the model is not a plain dense Llama-style model."""
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
            shape = shape_from_public_entry(entry, vocab_size)
        except ValueError:
            continue
        if shape.float32_bytes() <= MAX_FLOAT32_BYTES:
            names.append(entry["name"])
    return names


def random_state_dict(shape: LlamaShape, seed: int) -> dict[str, torch.Tensor]:
    """transformers' LlamaForCausalLM parameter names and shapes, normal(0, 0.02) weights from one seeded generator
    (never the global one), norms at 1."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**shape.hf_config(0, 0))
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(config)
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, parameter in skeleton.named_parameters():  # tied embeddings appear once
        if parameter.ndim == 1:
            tensors[name] = torch.ones(parameter.shape)
        else:
            tensors[name] = torch.empty(parameter.shape).normal_(0.0, INIT_STD, generator=generator)
    return tensors


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def hf_folder(shape: LlamaShape, seed: int) -> Path:
    """The folder's name becomes the GGUF's model name, so it says what the model is."""
    return cache_dir() / f"{shape.slug}-random-weights-v{shape.vocab_size}-seed{seed}"


def build_hf_folder(
    shape: LlamaShape, seed: int = 0, tokenizer_dir: Path = BUNDLED_MODEL_DIR, folder: Path | None = None
) -> Path:
    """Write the random model as a Hugging Face folder (config.json, model.safetensors, our tokenizer files and a
    model card saying what it is). Reused when already complete; written to a temporary folder and renamed, so a
    half-written build is never taken for a finished one."""
    folder = folder or hf_folder(shape, seed)
    if (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
        return folder
    tokenizer_config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    source_config = json.loads((tokenizer_dir / "config.json").read_text())  # the special tokens' ids
    bos, eos = source_config.get("bos_token_id", 0), source_config.get("eos_token_id", 0)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file(random_state_dict(shape, seed), str(partial / "model.safetensors"), metadata={"format": "pt"})
    (partial / "config.json").write_text(json.dumps(shape.hf_config(bos, eos), indent=2))
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, partial / name)
    (partial / "README.md").write_text(
        f"# {shape.name} shape, {LABEL}\n\nThe layers and widths of {shape.name} ({shape.layers} layers, width "
        f"{shape.hidden}, MLP {shape.mlp_width}, {shape.heads}/{shape.kv_heads} heads) with the Inference Lab "
        f"{shape.vocab_size}-token vocabulary, weights normal(0, {INIT_STD}) from seed {seed}. Its text is nonsense; "
        f"it exists to time serving. Tokenizer config: {tokenizer_config.get('tokenizer_class', 'fast tokenizer')}.\n"
    )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


@dataclass(frozen=True)
class BuiltModel:
    shape: LlamaShape
    seed: int
    hf_dir: Path
    gguf: Path
    build_s: float  # seconds this call took (a fraction of a second when everything was cached)

    @property
    def label(self) -> str:
        return f"{self.shape.name} shape, {LABEL}"


def build(name: str = DEFAULT_PUBLIC_MODEL, seed: int = 0, vocab_size: int = 4096) -> BuiltModel:
    """The random model's HF folder and its float32 GGUF (converted with the engines' converter), built on demand
    and cached. The HF folder is kept beside the GGUF, so transformers can load the same weights."""
    shape = public_shape(name, vocab_size)
    if shape.float32_bytes() > MAX_FLOAT32_BYTES:
        raise ValueError(f"{name} would be {shape.float32_bytes() / 1e9:.1f} GB in float32: too big to build here")
    started = time.perf_counter()
    folder = build_hf_folder(shape, seed)
    gguf = llamacpp.convert(str(folder), "f32")  # cached by the engines module, keyed by the weights' hash
    return BuiltModel(shape, seed, folder, gguf, time.perf_counter() - started)
