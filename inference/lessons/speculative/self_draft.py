"""Self-speculation: the target's own first k layers, then its own final norm and output layer, as the draft.

`layer_draft(target, k)` builds a new model object of the target's class from a copy of its config with
`num_hidden_layers=k`, whose modules ARE the target's (embeddings, layers 0..k-1, rotary embedding, final norm, output
layer): no weight is copied, none is changed, and the target (a shared, cached model) is never touched. The draft runs
through transformers' forward (`ModelDrafter`: `TransformersForward`, or `ShortlistForward` over the tokenizer's
first ids) with its own KV cache of k layers, separate from the target's.

A draft pass costs about k/L of a target pass plus the output layer, which on a large vocabulary is a big share: the
shortlist multiplies only its rows. A byte-level BPE tokenizer numbers its merges in the order it learned them, most
frequent pairs first, so its lowest ids are a frequency ranking of its own training text
(`tokenizer_shortlist`).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from inference.core.forward import vocabulary_rows

DEFAULT_LAYERS = 8  # the page's and the bench's k; on SmolLM2 every k measured lost (inference/bench/real_spec.py)
LAYER_CHOICES = (4, 6, 8, 12)
SHORTLIST_ROWS = 8192  # the tokenizer's first ids a shortlisted self-draft scores


class SelfDraftError(ValueError):
    pass


def decoder_layers(model) -> int:
    return int(model.config.num_hidden_layers)


def shortlist_rows(model) -> int:
    """How many of the tokenizer's first ids a shortlisted self-draft of this model scores."""
    return min(SHORTLIST_ROWS, vocabulary_rows(model))


def layer_choices(layers: int) -> list[int]:
    """The page's choices of k for a target of `layers` layers: every k for a shallow model, else `LAYER_CHOICES` and
    every fourth layer up to layers - 2."""
    if layers <= 8:
        return list(range(1, layers))
    picks = {k for k in LAYER_CHOICES if k < layers} | {k for k in range(4, layers, 4)} | {layers // 2, layers - 2}
    return sorted(picks)


def can_self_draft(model) -> bool:
    """A decoder whose body exposes its layers as `model.model.layers`, with its final norm and embeddings beside them
    (Llama, Mistral, Qwen2 and their kin): the layout `layer_draft` rebuilds."""
    body = getattr(model, "model", None)
    return all(hasattr(body, name) for name in ("layers", "norm", "embed_tokens", "rotary_emb")) and hasattr(
        model, "lm_head"
    )


def layer_draft(target, k: int):
    """A model of the target's class running the target's first `k` layers, final norm and output layer: every module
    shared (read-only), none copied. Raises SelfDraftError for a k outside 1..layers-1 or an unknown layout."""
    layers = decoder_layers(target)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < layers:
        raise SelfDraftError(f"A self-draft keeps 1 to {layers - 1} of the target's {layers} layers, not {k!r}.")
    if not can_self_draft(target):
        raise SelfDraftError(f"{type(target).__name__} does not expose its layers as model.layers: no self-draft.")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = k
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = list(config.layer_types[:k])
    with torch.device("meta"):  # the skeleton allocates nothing: each of its modules is replaced by the target's
        draft = type(target)(config)
    body, source = draft.model, target.model
    body.embed_tokens = source.embed_tokens
    body.layers = nn.ModuleList(list(source.layers[:k]))  # a new list holding the same layer modules
    body.norm = source.norm
    body.rotary_emb = source.rotary_emb
    draft.lm_head = target.lm_head
    # The two new containers only: `.eval()` would also walk the shared modules (already in eval mode).
    draft.training = body.training = False
    leftovers = [name for name, t in [*draft.named_parameters(), *draft.named_buffers()] if t.is_meta]
    if leftovers:
        raise SelfDraftError(f"The self-draft kept unshared tensors: {', '.join(leftovers)}")
    return draft


def shares_weights(draft, target) -> bool:
    """Every parameter of the draft is one of the target's tensors (same storage)."""
    target_ptrs = {p.data_ptr() for p in target.parameters()}
    return all(p.data_ptr() in target_ptrs for p in draft.parameters())


def tokenizer_shortlist(model, rows: int = SHORTLIST_ROWS) -> list[int]:
    """The vocabulary's first `rows` ids: for a BPE tokenizer, its bytes and most frequent merges."""
    return list(range(min(rows, vocabulary_rows(model))))
