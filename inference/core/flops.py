"""Arithmetic of one forward pass, counted from the model itself (FLOPs: a multiply and an add are two).

    count = FlopCount.of(model)
    count.prefill(prompt_tokens=256)      # one pass over the prompt, logits for the last position only
    count.decode(context_tokens=300)      # one pass for one new token with 300 tokens before it

Per token, every matrix product of the layers costs 2 x its weights (an MoE layer: the router and the k of E experts
a token uses); attention adds 2 x 2 x head_dim per head, layer and position attended (a sliding layer: at most its
window); the output layer runs once per pass. Embeddings, norms, activations and softmax (a few FLOPs per number,
not per weight) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from inference.core import model_config


def _is_conv1d(module: nn.Module) -> bool:
    return type(module).__name__ == "Conv1D"  # GPT-2's linear layer with a transposed weight


def _sparse_weights_per_token(model: nn.Module) -> int:
    """Mixtral-layout MoE: each router's weight [experts, hidden], and k / E of each layer's experts
    (`gate_up_proj` and `down_proj`, [experts, ...] each): the weights one token multiplies by."""
    k, experts = getattr(model.config, "num_experts_per_tok", None), getattr(model.config, "num_local_experts", None)
    if not k or not experts:
        return 0
    total = 0
    for m in model.modules():
        if type(m).__name__.endswith("TopKRouter"):
            total += m.weight.numel()
        elif type(m).__name__.endswith("Experts"):
            total += sum(p.numel() for p in m.parameters(recurse=False)) // experts * k
    return total


@dataclass(frozen=True)
class FlopCount:
    shape: model_config.ModelShape
    matmul_weights: int  # weights of the layers' matrix products (attention and MLP), output layer excluded
    output_weights: int  # hidden x vocabulary

    @classmethod
    def of(cls, model: nn.Module) -> FlopCount:
        output = model.get_output_embeddings()
        layers = sum(
            m.weight.numel() for m in model.modules() if (isinstance(m, nn.Linear) or _is_conv1d(m)) and m is not output
        )
        layers += _sparse_weights_per_token(model)
        return cls(model_config.from_config(model.config), layers, output.weight.numel())

    def attention(self, new_tokens: int, cached_tokens: int = 0) -> int:
        """Query-key products and value sums of `new_tokens` positions after `cached_tokens` (causal)."""
        per_position = 2 * 2 * self.shape.attention_heads * self.shape.head_dim
        total = 0
        for kind in self.shape.layer_types:
            window = self.shape.sliding_window if kind == model_config.SLIDING else None
            for position in range(cached_tokens, cached_tokens + new_tokens):
                attended = position + 1 if window is None else min(position + 1, window)
                total += per_position * attended
        return total

    def prefill(self, prompt_tokens: int) -> int:
        """One pass over the prompt: 2 x matmul weights per token, attention, output layer once."""
        return 2 * self.matmul_weights * prompt_tokens + self.attention(prompt_tokens) + 2 * self.output_weights

    def decode(self, context_tokens: int) -> int:
        """One pass for one token with `context_tokens` tokens already in the cache."""
        return 2 * self.matmul_weights + self.attention(1, context_tokens) + 2 * self.output_weights
