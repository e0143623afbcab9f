"""Which experts each token goes to in a Mixture-of-Experts model, read from the router itself (Mixtral layout: a
router `mlp.gate` [experts, hidden] scores every expert, a softmax, the top k kept and renormalised to sum to 1).

The step engine asks for router logits on its own passes (`output_router_logits=True`, gathered per call by
transformers: no hook, no attribute, no copied weight here). Experiments (top-1, an expert off) run on a `variant`,
a second model object sharing the weight tensors read-only. Corpus statistics are computed at card time
(`inference.training.moe_stats`) and stored beside the weights as `routing_stats.json`."""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter

from inference.core.measuring import time_decode_step
from inference.core.paths import MODELS_DIR

BUNDLED_MOE_NAME = "storyteller-moe-16m"
BUNDLED_MOE_DIR = MODELS_DIR / BUNDLED_MOE_NAME
STATS_FILE = "routing_stats.json"
LOAD_LOG_FILE = "expert_load_log.json"


def has_experts(model) -> bool:
    """True for a sparse Mixtral-layout model: a router and `num_local_experts` experts per layer."""
    config = model.config
    return bool(getattr(config, "num_local_experts", 0)) and bool(getattr(config, "num_experts_per_tok", 0))


@dataclass(frozen=True)
class ExpertShape:
    layers: int
    experts: int
    k: int  # experts per token

    @classmethod
    def of(cls, model) -> ExpertShape:
        c = model.config
        return cls(c.num_hidden_layers, c.num_local_experts, c.num_experts_per_tok)


def top_k(probabilities: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(experts, weights) [..., k]: the k most probable, renormalised to sum to 1 (as MixtralTopKRouter does)."""
    kept, experts = torch.topk(probabilities, k, dim=-1)
    return experts, kept / kept.sum(dim=-1, keepdim=True)


@dataclass(frozen=True)
class Routing:
    """The router's decision for a run of tokens, in every layer."""

    token_ids: list[int]
    probabilities: torch.Tensor  # [layers, tokens, experts] float32
    k: int

    def chosen(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(experts, weights): [layers, tokens, k] each; see `top_k`."""
        return top_k(self.probabilities, self.k)

    def counts(self) -> torch.Tensor:
        """[layers, experts] int64: (token, slot) picks each expert received; each row sums to tokens x k."""
        experts, _ = self.chosen()
        return torch.stack(
            [torch.bincount(layer.reshape(-1), minlength=self.probabilities.shape[2]) for layer in experts]
        )


def trace_routing(trace) -> Routing | None:
    """The routing the engine recorded for every token fed so far (a chosen token is fed by the next step); None
    for a dense model or before the first step."""
    parts = [r.router_logits for r in trace.records if r.router_logits is not None]
    if not parts:
        return None
    logits = torch.cat(parts, dim=1)  # [layers, tokens fed, experts]
    fed = trace.all_ids[: logits.shape[1]]
    return Routing(fed, F.softmax(logits, dim=-1), trace.model.config.num_experts_per_tok)


# -- experiments on a variant that shares the weights --------------------------------------------


class RestrictedRouter(MixtralTopKRouter):
    """A Mixtral router on the original's weight (shared, read only) with its own k, and experts switched off (logit
    -inf: never among the top k). It is a MixtralTopKRouter, so `output_router_logits` records it."""

    def __init__(self, weight: torch.Tensor, k: int, off: tuple[int, ...] = ()):
        nn.Module.__init__(self)  # not the parent's: it would allocate a new weight from a config
        self.weight = weight
        self.top_k = k
        self.num_experts, self.hidden_dim = weight.shape
        self.off = off

    def forward(self, hidden_states: torch.Tensor):
        hidden_states = hidden_states.reshape(-1, self.weight.shape[1])
        logits = F.linear(hidden_states, self.weight)
        if self.off:
            logits = logits.clone()
            logits[:, list(self.off)] = float("-inf")
        experts, weights = top_k(F.softmax(logits.float(), dim=-1), self.top_k)
        return logits, weights, experts


def variant(model, k: int | None = None, off: tuple[int, ...] = ()):
    """A second model object on the same weight tensors (built on the meta device, filled with `assign=True`, never
    written) whose routers keep `k` experts per token and never pick those in `off` (in every layer)."""
    shape = ExpertShape.of(model)
    k = shape.k if k is None else k
    if not 1 <= k <= shape.experts - len(off):
        raise ValueError(f"`k` has to be from 1 to {shape.experts - len(off)} with {len(off)} experts off, but is {k}")
    if any(not 0 <= e < shape.experts for e in off):
        raise ValueError(f"Experts to switch off have to be from 0 to {shape.experts - 1}, but are {off}")
    config = copy.deepcopy(model.config)
    config.num_experts_per_tok = k
    with torch.device("meta"):
        twin = type(model)(config)
    twin.load_state_dict(model.state_dict(), assign=True)
    twin.model.rotary_emb = type(model.model.rotary_emb)(config)  # computed buffers, not weights: rebuild
    twin.eval().requires_grad_(False)
    for layer in twin.model.layers:
        layer.mlp.gate = RestrictedRouter(layer.mlp.gate.weight, k, tuple(off))
        layer.mlp.top_k = k
    twin.generation_config = copy.deepcopy(model.generation_config)
    return twin


# -- what sparsity costs: parameters and bytes, counted from the tensors --------------------------


@dataclass(frozen=True)
class Budget:
    """Parameters and weight bytes a model holds, and what one decoded token uses of them."""

    total_parameters: int
    active_parameters: int  # all but the experts a token does not use (the usual "active" count)
    expert_parameters: int  # all experts of all layers
    bytes_held: int
    bytes_read_per_token: int  # one embedding row, every other weight a token multiplies by
    tied_embeddings: bool


def budget(model) -> Budget:
    """Counted from the tensors: a decoded token reads one row of the input table, all attention, norms and
    routers, k experts a layer, and the whole output layer (tied: the embedding table read as a matrix)."""
    params = dict(model.named_parameters())  # a tied table once
    size = {name: p.numel() * p.element_size() for name, p in params.items()}
    held, total = sum(size.values()), sum(p.numel() for p in params.values())
    experts = sum(p.numel() for name, p in params.items() if ".experts." in name)
    expert_bytes = sum(b for name, b in size.items() if ".experts." in name)
    share = model.config.num_experts_per_tok / model.config.num_local_experts if has_experts(model) else 1.0
    embedding, output = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    tied = embedding.data_ptr() == output.data_ptr()
    embedding_bytes = embedding.numel() * embedding.element_size()
    # Held bytes minus the experts not used and, untied, the embedding rows not looked up.
    unread_table = 0 if tied else embedding_bytes - embedding.shape[1] * embedding.element_size()
    read = held - round(expert_bytes * (1 - share)) - unread_table
    return Budget(
        total_parameters=total,
        active_parameters=total - round(experts * (1 - share)),
        expert_parameters=experts,
        bytes_held=held,
        bytes_read_per_token=read,
        tied_embeddings=tied,
    )


# -- statistics over a text, for routing_stats.json ----------------------------------------------


def expert_top_tokens(routing: Routing, tokenizer, top: int = 12) -> list[list[list[dict]]]:
    """[layer][expert] -> the `top` tokens most often routed there: count, occurrences in the text, text."""
    experts, _ = routing.chosen()  # [layers, tokens, k]
    ids, occurrences = torch.tensor(routing.token_ids), Counter(routing.token_ids)
    return [
        [  # a token goes to an expert at most once
            [
                {"token_id": t, "token": tokenizer.decode([t]), "count": c, "occurrences": occurrences[t]}
                for t, c in Counter(ids[(layer == expert).any(dim=-1)].tolist()).most_common(top)
            ]
            for expert in range(routing.probabilities.shape[2])
        ]
        for layer in experts
    ]


def load_stats(routing: Routing) -> dict:
    counts = routing.counts()
    return {
        "tokens": len(routing.token_ids),
        "k": routing.k,
        "counts": counts.tolist(),
        "fractions": (counts.double() / counts.sum(dim=1, keepdim=True)).tolist(),
        "first_choice_counts": [
            torch.bincount(layer[:, 0], minlength=routing.probabilities.shape[2]).tolist()
            for layer in routing.chosen()[0]
        ],
    }


def token_expert_information(routing: Routing) -> list[dict]:
    """Per layer: the first choice's entropy and the part of it the token explains (mutual information in bits, a
    plug-in estimate: high for rare tokens, so an upper bound)."""
    ids, n = routing.token_ids, len(routing.token_ids)

    def entropy(counts: Counter) -> float:
        return -sum(c / n * math.log2(c / n) for c in counts.values())

    out = []
    for first in routing.chosen()[0][..., 0].tolist():  # each layer's first choices
        h_expert = entropy(Counter(first))
        mutual = entropy(Counter(ids)) + h_expert - entropy(Counter(zip(ids, first)))
        out.append({"expert_entropy_bits": h_expert, "mutual_information_bits": mutual})
    return out


# -- timing --------------------------------------------------------------------------------------


def decode_timings(
    models: dict[str, object], prompt_ids: list[int], repeats: int = 5, steps: int = 48, progress=None
) -> dict[str, list[float]]:
    """Each model's median decode step (ms) at the prompt's context in each of `repeats` interleaved runs."""
    runs = {name: [] for name in models}
    for r in range(repeats):
        if progress:
            progress(r, repeats, f"timing, run {r + 1} of {repeats}")
        for name, model in models.items():
            runs[name].append(time_decode_step(model, len(prompt_ids), repeats=steps).median_ms)
    if progress:
        progress(repeats, repeats, "done")
    return runs
