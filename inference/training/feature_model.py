"""The feature draft's model and files (run by `inference.lessons.speculative.feature_draft`, trained by
`inference.training.distill_features`): a one-layer `LlamaModel` body over `inputs_embeds` (vocab_size 1: it never
embeds a token), `fc` mixing [embedding, feature] into its input, and the shortlist its output is scored on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaModel

from inference.core.paths import MODELS_DIR

FEATURE_DRAFT_NAME = "smollm2-feature-draft"
FEATURE_DRAFT_DIR = MODELS_DIR / FEATURE_DRAFT_NAME
WEIGHTS_FILE = "model.safetensors"
FC_KEY, ROWS_KEY = "fc.weight", "shortlist_rows"


class FeatureDraftError(ValueError):
    pass


@dataclass(frozen=True)
class FeatureDraft:
    """A loaded feature draft, shared (cached) between sessions: only called, never changed."""

    body: LlamaModel
    fc: torch.nn.Linear
    rows: torch.Tensor  # [shortlist] long, sorted
    name: str

    @property
    def hidden_size(self) -> int:
        return int(self.body.config.hidden_size)

    def parameters(self) -> int:
        return sum(p.numel() for p in self.body.parameters()) + self.fc.weight.numel()


def body_config(target_config, layers: int = 1) -> LlamaConfig:
    """The body's config: the target's attention and MLP shapes, `layers` decoder layers, no vocabulary of its own."""
    c = target_config
    return LlamaConfig(
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        vocab_size=1,
        max_position_embeddings=c.max_position_embeddings,
        rope_parameters=dict(c.rope_parameters),
        rms_norm_eps=c.rms_norm_eps,
        hidden_act=c.hidden_act,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def load(folder: Path = FEATURE_DRAFT_DIR) -> FeatureDraft:
    """The feature draft in `folder`; FeatureDraftError when its files are missing or do not match."""
    try:
        config = LlamaConfig.from_pretrained(folder)
        tensors = load_file(str(Path(folder) / WEIGHTS_FILE))
    except (OSError, ValueError) as err:
        raise FeatureDraftError(f"No feature draft in {folder}: {err}") from err
    body = LlamaModel(config)
    fc = torch.nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
    rows = tensors.pop(ROWS_KEY).long()
    tensors = {name: tensor.float() for name, tensor in tensors.items()}  # shipped in bfloat16, run in float32
    fc.load_state_dict({"weight": tensors.pop(FC_KEY)})
    tensors.setdefault("embed_tokens.weight", body.embed_tokens.weight.detach())  # its 1-row placeholder
    body.load_state_dict(tensors, strict=True)
    for p in [*body.parameters(), *fc.parameters()]:
        p.requires_grad_(False)
    return FeatureDraft(body.eval(), fc.eval(), rows, Path(folder).name)
