"""One MoE layer's work for one token, expert by expert (recomputed from the layer's input), and the page's decode
timing of the MoE, its top-1 variant and the dense model."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inference.core import routing
from inference.core.forward import TransformersForward
from inference.core.machine import cpu_name

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
REPEATS = 3
STEPS = 24
DENSE, MOE, MOE_TOP_1 = "dense", "MoE, top-2", "MoE, top-1"


@dataclass(frozen=True)
class DecodeTimes:
    runs: dict[str, list[float]]  # model -> decode ms per token of each interleaved run
    cpu: str
    threads: int  # torch threads during the measurement
    repeats: int
    steps: int
    prompt_tokens: int

    @property
    def ms_per_token(self) -> dict[str, float]:
        return {name: statistics.median(times) for name, times in self.runs.items()}


def measure(dense_model, moe_model, prompt_ids: list[int], progress=None) -> DecodeTimes:
    """The dense model, the MoE and its top-1 variant (the MoE's own tensors, router keeping one expert) timed by
    `routing.decode_timings`: greedy steps through transformers' forward with a KV cache, runs interleaved."""
    models = {DENSE: dense_model, MOE: moe_model, MOE_TOP_1: routing.variant(moe_model, k=1)}
    ms = routing.decode_timings(models, prompt_ids, repeats=REPEATS, steps=STEPS, progress=progress)
    return DecodeTimes(ms, cpu_name(), torch.get_num_threads(), REPEATS, STEPS, len(prompt_ids))


def mlp_inputs(model, token_ids: list[int]) -> torch.Tensor:
    """[layers, tokens, hidden]: what each layer's sparse block receives, recomputed from each layer's input (the
    residual stream, from the forward boundary) through the layer's own norm, attention (causal mask given
    explicitly) and post-attention norm. An independent path to the router's input: it does not use the router's
    output at all."""
    residuals = TransformersForward(model, None).layer_inputs(list(token_ids))  # [layers + 1, tokens, hidden]
    n = len(token_ids)
    positions = torch.arange(n).unsqueeze(0)
    causal = torch.ones(n, n, dtype=torch.bool).tril().view(1, 1, n, n)
    inputs = []
    with torch.inference_mode():
        for index, layer in enumerate(model.model.layers):
            residual = residuals[index].unsqueeze(0)  # [1, tokens, hidden]: the layer's input
            normed = layer.input_layernorm(residual)
            cos_sin = model.model.rotary_emb(normed, positions)
            attended, _ = layer.self_attn(hidden_states=normed, position_embeddings=cos_sin, attention_mask=causal)
            inputs.append(layer.post_attention_layernorm(residual + attended)[0])
    return torch.stack(inputs)


def router_from_input(model, layer: int, mlp_input: torch.Tensor) -> torch.Tensor:
    """[tokens, experts] probabilities: the router's weight applied to its input, then softmax."""
    weight = model.model.layers[layer].mlp.gate.weight
    return F.softmax(F.linear(mlp_input, weight).float(), dim=-1)


@dataclass(frozen=True)
class Mixture:
    """One token in one layer: each chosen expert's output, its weight, and their weighted sum."""

    experts: list[int]
    weights: list[float]
    outputs: torch.Tensor  # [k, hidden]: each chosen expert's output, before weighting
    mixture: torch.Tensor  # [hidden]: sum of weight x output, what the layer adds to the residual


@torch.inference_mode()
def mixture(model, mlp_input: torch.Tensor, layer: int) -> Mixture:
    """The sparse block's work for one token (`mlp_input` [hidden]), expert by expert."""
    block = model.model.layers[layer].mlp
    probs = router_from_input(model, layer, mlp_input.unsqueeze(0))[0]
    experts, weights = routing.top_k(probs, model.config.num_experts_per_tok)
    outputs = []
    for e in experts.tolist():
        gate, up = F.linear(mlp_input, block.experts.gate_up_proj[e]).chunk(2, dim=-1)
        outputs.append(F.linear(block.experts.act_fn(gate) * up, block.experts.down_proj[e]))
    outputs = torch.stack(outputs)
    return Mixture(experts.tolist(), weights.tolist(), outputs, (weights.unsqueeze(-1) * outputs).sum(0))
