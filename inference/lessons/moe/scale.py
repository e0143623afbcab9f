"""Mixture of Experts as a cost lever, measured on three models built here from configs, equal but for their
feed-forward blocks: a small dense MLP as wide as the experts a token uses (k x expert width), the MoE (E experts,
k per token, Mixtral layout), and a big dense MLP as wide as all experts. Per token the MoE does the small model's
arithmetic and reads its weights, but holds the big one's. Weights are random from a private generator: speed and
memory do not depend on what weights have learned, and nothing is downloaded."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import pandas as pd
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

from inference.core import routing
from inference.core.kv_cache import new_cache
from inference.core.measuring import Progress, filler_batch, timed_decode, timed_pass
from inference.core.model_config import decoder_config_fields

DENSE_ACTIVE = "small dense"  # as many parameters as the MoE model uses per token
MOE = "MoE"
DENSE_TOTAL = "big dense"  # as many parameters as the MoE model holds
PROMPT_TOKENS = 128  # the prefill timed for one sequence
BATCH_PROMPT_TOKENS = 8  # prompts of the batched runs: only their decode passes are timed
REPEATS = 3  # interleaved timing runs; medians are reported


@dataclass(frozen=True)
class MoEDesign:
    hidden: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    expert_width: int = 1024  # intermediate size of one expert MLP
    experts: int = 8
    experts_per_token: int = 2
    vocab: int = 4096
    context: int = 512

    def __post_init__(self):
        if not 1 <= self.experts_per_token <= self.experts:
            raise ValueError(f"`experts_per_token` has to be from 1 to {self.experts}, but is {self.experts_per_token}")

    def configs(self) -> dict[str, object]:
        shared = decoder_config_fields(self.vocab, self.hidden, self.layers, self.heads, self.kv_heads, self.context)
        width, experts, k = self.expert_width, self.experts, self.experts_per_token
        return {
            DENSE_ACTIVE: LlamaConfig(**shared, intermediate_size=width * k),
            MOE: MixtralConfig(**shared, intermediate_size=width, num_local_experts=experts, num_experts_per_tok=k),
            DENSE_TOTAL: LlamaConfig(**shared, intermediate_size=width * experts),
        }


def random_model(config, seed: int):
    """A model from `config` on the meta device, filled from a private generator (no global RNG): matrices
    N(0, 0.02), norm weights 1; tied embeddings stay one tensor."""
    model_class = MixtralForCausalLM if isinstance(config, MixtralConfig) else LlamaForCausalLM
    with torch.device("meta"):
        model = model_class(config)
    model = model.to_empty(device="cpu").eval()
    model.tie_weights()  # to_empty gives every tensor its own storage: tie the output layer again, as configured
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, 0.02, generator=gen)
    model.model.rotary_emb = type(model.model.rotary_emb)(config)  # computed buffers, not weights: rebuild
    return model


def parameter_counts(model) -> tuple[int, int]:
    """(total, used per token): a token uses the router and k experts per layer."""
    budget = routing.budget(model)
    return budget.total_parameters, budget.active_parameters


@torch.inference_mode()
def _time_model(model, prompt_tokens: int, decode_steps: int, seed: int, batch: int = 1) -> tuple[float, float]:
    """(prefill ms, median decode ms per pass) for one run of `batch` sequences."""
    cache = new_cache(model.config)
    logits, prefill_ms = timed_pass(model, filler_batch(model.config.vocab_size, batch, prompt_tokens, seed), cache)
    _, steps = timed_decode(model, logits, cache, decode_steps)
    return prefill_ms, median(steps)


@torch.inference_mode()
def experts_read_per_pass(model, batch: int, seed: int = 0) -> float:
    """Distinct experts picked in one decode pass of `batch` sequences, averaged over layers: each picked expert's
    weights are read in that pass. (Hooks go on this lesson's own model only, and come off again.)"""
    picked = []
    hooks = [
        layer.mlp.gate.register_forward_hook(lambda module, args, out: picked.append(out[2].unique().numel()))
        for layer in model.model.layers
    ]
    try:
        cache = new_cache(model.config)
        logits, _ = timed_pass(model, filler_batch(model.config.vocab_size, batch, BATCH_PROMPT_TOKENS, seed), cache)
        picked.clear()  # count the decode pass only
        timed_pass(model, logits.argmax(-1, keepdim=True), cache)
    finally:
        for hook in hooks:
            hook.remove()
    return sum(picked) / len(picked)


def measure(
    design: MoEDesign = MoEDesign(),
    prompt_tokens: int = PROMPT_TOKENS,
    decode_steps: int = 24,
    repeats: int = REPEATS,
    batch: int = 16,
    seed: int = 0,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per model: parameters, weight bytes, prefill ms, decode ms per token alone and per pass of `batch`
    sequences, medians of `repeats` interleaved runs (a busy spell hits all alike), each also against the small
    dense model."""
    configs = design.configs()
    models = {}
    steps_total = len(configs) + repeats
    for i, (name, config) in enumerate(configs.items()):
        if progress:
            progress(i, steps_total, f"building {name}")
        models[name] = random_model(config, seed + i)
    for model in models.values():
        _time_model(model, 16, 2, seed)  # warm-up
        _time_model(model, BATCH_PROMPT_TOKENS, 2, seed, batch)
    runs = {name: [] for name in models}
    for r in range(repeats):
        if progress:
            progress(len(configs) + r, steps_total, f"timing, run {r + 1} of {repeats}")
        for name, model in models.items():
            prefill_ms, decode_ms = _time_model(model, prompt_tokens, decode_steps, seed + 100 + r)
            _, batch_pass_ms = _time_model(model, BATCH_PROMPT_TOKENS, decode_steps, seed + 200 + r, batch)
            runs[name].append((prefill_ms, decode_ms, batch_pass_ms))
    if progress:
        progress(steps_total, steps_total, "done")
    frame = pd.DataFrame(
        [
            {
                "model": name,
                "total_parameters": parameter_counts(model)[0],
                "active_parameters": parameter_counts(model)[1],
                "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                "decode_ms_runs": [r[1] for r in runs[name]],
                "batch": batch,
                **dict(zip(["prefill_ms", "decode_ms_per_token", "batch_ms_per_pass"], map(median, zip(*runs[name])))),
            }
            for name, model in models.items()
        ]
    )
    for column, sequences in (("experts_read_alone", 1), ("experts_read_in_batch", batch)):
        frame[column] = [experts_read_per_pass(m, sequences) if name == MOE else None for name, m in models.items()]
    base = frame.set_index("model").loc[DENSE_ACTIVE]
    frame["decode_vs_dense_active"] = frame["decode_ms_per_token"] / base["decode_ms_per_token"]
    frame["batch_vs_dense_active"] = frame["batch_ms_per_pass"] / base["batch_ms_per_pass"]
    frame["memory_vs_dense_active"] = frame["weight_bytes"] / base["weight_bytes"]
    return frame


def weights_read_per_token(model: dict) -> int:
    """Parameters one token reads, from a public entry: the active ones, less the input table but one row when it is
    not tied to the output layer (tied, the output layer reads it whole anyway)."""
    if model["tied_embeddings"]:
        return model["active_parameters"]
    return model["active_parameters"] - model["vocab_size"] * model["hidden_size"] + model["hidden_size"]


PUBLIC_COLUMNS = {  # public_moe_table's columns as the page shows them: (label, number format)
    "experts_per_token": ("per token", None),
    "total_parameters_b": ("params (B)", "%.1f"),
    "active_parameters_b": ("active (B)", "%.1f"),
    "active_share": ("active share", "percent"),
    "memory_gb_bf16": ("memory, bf16 (GB)", "%.1f"),
    "weights_read_per_token_gb_bf16": ("read per token (GB)", "%.1f"),
}


def public_moe_table(models: list[dict]) -> pd.DataFrame:
    """The MoE models among the public ones: total vs active parameters, and in bfloat16 (2 bytes a weight) the
    memory to hold each and the bytes of weights one token reads."""
    moe = [m for m in models if m.get("experts")]
    return pd.DataFrame(
        {
            "model": [m["name"] for m in moe],
            "experts": [m["experts"] for m in moe],
            "experts_per_token": [m["experts_per_token"] for m in moe],
            "total_parameters_b": [m["parameters"] / 1e9 for m in moe],
            "active_parameters_b": [m["active_parameters"] / 1e9 for m in moe],
            "active_share": [m["active_parameters"] / m["parameters"] for m in moe],
            "memory_gb_bf16": [m["parameters"] * 2 / 1e9 for m in moe],
            "weights_read_per_token_gb_bf16": [weights_read_per_token(m) * 2 / 1e9 for m in moe],
        }
    )
