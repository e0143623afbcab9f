"""Inside one forward pass: what each layer would predict, what each head read, where the time goes.

    inside = look_inside(model, token_ids)        # one prefill pass, then the last token as a decode pass
    inside.lens_probs[layer]                      # [vocab]: layer's residual stream read as a prediction
    inside.attention[layer, head]                 # [tokens]: the new token's attention weights
    inside.parts                                  # FLOPs, weight bytes and measured ms of every part

Every pass runs through the forward boundary (`TransformersForward.look`: transformers' own forward, its hidden
states, each part timed by hooks). Logit lens (nostalgebraist 2020): the residual stream after layer i through
the model's own final norm and output layer; only the last layer was trained to be read that way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from statistics import median

import pandas as pd
import torch

from inference.core import model_config
from inference.core.forward import TransformersForward
from inference.core.measuring import Stopwatch, Timing, time_decode_step
from inference.lessons.inside import adapters
from inference.lessons.inside.adapters import UnsupportedModel, adapter_for

DECODE_REPEATS = 5  # decode passes timed (median per part): one takes ~5 ms on the bundled model
RANK_POSITIONS = 16  # positions of the lens heat map, ending at the new token (their ranks stay legible)
PLAIN_REPEATS = 10  # plain decode steps timed beside the walk (measuring.time_decode_step), after its warm-ups
TOP = 10  # tokens kept per lens row for the tables and the JSON

__all__ = ["Inside", "UnsupportedModel", "look_inside"]


@dataclass(frozen=True)
class Inside:
    token_ids: list[int]  # the context; the last one is the new token the decode pass fed
    followed_id: int  # the token the lens follows: the run's choice, or the model's top token
    lens_probs: torch.Tensor  # [layers + 1, vocab] float32; row 0 = embeddings, row L = the model's distribution
    rank_positions: list[int]  # positions of the heat map (the last `RANK_POSITIONS`)
    rank_targets: list[int]  # the next token at each of them (the followed token at the last)
    ranks: torch.Tensor  # [layers + 1, positions] int64: 0-based rank of the next token per layer
    attention: torch.Tensor  # [layers, heads, tokens] float32: the new token's weights over every position
    kv_groups: list[list[int]]  # per KV head, the query heads that read it
    cache_bytes_per_layer: list[int]  # measured from the cache tensors the attention read
    parts: pd.DataFrame  # one row per part: name, kind, layer, flops, prefill_flops, bytes, read_bytes, ms
    logits: torch.Tensor  # [vocab] float32: the decode pass's output
    experts: list[list[int]] | None  # MoE: per layer, the experts the new token went to
    decode_pass_ms: tuple[float, ...] = ()  # each timed decode pass as a whole, its parts' clocks included
    plain_decode: Timing | None = None  # the same step as one plain forward pass, timed the way other pages time it

    @property
    def layers(self) -> int:
        return self.attention.shape[0]

    @property
    def heads(self) -> int:
        return self.attention.shape[1]

    @property
    def context(self) -> int:
        return len(self.token_ids)

    def lens_top(self, layer: int, count: int = TOP) -> tuple[list[int], list[float]]:
        probs, ids = torch.topk(self.lens_probs[layer], count)
        return ids.tolist(), probs.tolist()

    def followed_probs(self) -> list[float]:
        return self.lens_probs[:, self.followed_id].tolist()

    def to_json(self) -> dict:
        """The command line's JSON: `lens`, `attention` ([layer][head][position]) and `parts`."""
        argmax = int(self.logits.argmax())
        lens = [
            dict(zip(("top_ids", "top_probs"), self.lens_top(layer)), layer=layer, chosen_prob=float(self.lens_probs[layer, argmax]))
            for layer in range(self.layers + 1)
        ]  # fmt: skip
        columns = ["name", "flops", "bytes", "decode_ms", "prefill_flops", "prefill_ms", "read_bytes"]
        table = self.parts[columns].rename(columns={"read_bytes": "decode_bytes_read"})
        parts = json.loads(table.to_json(orient="records"))
        return {"context_tokens": self.context, "lens": lens, "attention": self.attention.tolist(), "parts": parts}


def _unique_bytes(modules, seen: set[int]) -> int:
    total = 0
    for module in modules:
        for p in module.parameters():
            if p.data_ptr() not in seen:
                seen.add(p.data_ptr())
                total += p.numel() * p.element_size()
    return total


def _matmul_weights(modules) -> int:
    """Weights of the matrix products in `modules`: nn.Linear / GPT-2 Conv1D weights, MoE experts' 3-D tensors."""
    total = 0
    for module in modules:
        for m in module.modules():
            if (
                isinstance(m, torch.nn.Linear)
                or type(m).__name__ == "Conv1D"
                or type(m).__name__.endswith("TopKRouter")
            ):
                total += m.weight.numel()
    return total


def _expert_weights(modules) -> tuple[int, int]:
    """(weights of one expert, bytes of one expert) of a Mixtral-layout experts module."""
    experts = modules[0]
    tensors = list(experts.parameters(recurse=False))
    count = tensors[0].shape[0]
    return sum(p.numel() for p in tensors) // count, sum(p.numel() * p.element_size() for p in tensors) // count


def _attended(shape: model_config.ModelShape, layer: int, position: int) -> int:
    window = shape.sliding_window if shape.layer_types[layer] == model_config.SLIDING else None
    return position + 1 if window is None else min(position + 1, window)


def part_table(model, adapter, tokens: int, experts: list[list[int]] | None, cache_bytes: list[int]) -> pd.DataFrame:
    """FLOPs (flops.py's rules, part by part) of a prefill over `tokens` and of the decode pass of the last one,
    weight bytes held (each tensor once: a tied embedding table under the output layer, which reads all of it)
    and bytes a decode pass reads (one embedding row, the chosen experts, the layer's KV cache)."""
    shape, config = adapter.shape, model.config
    per_position = 2 * 2 * shape.attention_heads * shape.head_dim  # q.k and the weighted sum of v
    modules = adapter.part_modules()
    seen: set[int] = set()
    held = {adapters.OUTPUT: _unique_bytes(modules[adapters.OUTPUT], seen)}
    for name, mods in modules.items():
        held.setdefault(name, _unique_bytes(mods, seen))
    rows = []
    for name, mods in modules.items():
        kind, layer = name, None
        if name.startswith("layer "):
            layer, kind = int(name.split()[1]), name.split(" ", 2)[2]
        weights = _matmul_weights(mods)
        row = {"name": name, "kind": kind, "layer": layer, "bytes": held[name], "read_bytes": held[name]}
        if kind == adapters.OUTPUT:
            row["prefill_flops"] = row["flops"] = 2 * model.get_output_embeddings().weight.numel()
        elif kind == adapters.EMBEDDING:
            row["prefill_flops"] = row["flops"] = 0
            row["read_bytes"] = sum(m.weight[0].numel() * m.weight.element_size() for m in mods)  # one row each
        elif kind == adapters.ATTENTION:
            attended = sum(_attended(shape, layer, p) for p in range(tokens))
            row["prefill_flops"] = 2 * weights * tokens + per_position * attended
            row["flops"] = 2 * weights + per_position * _attended(shape, layer, tokens - 1)
            row["read_bytes"] = held[name] + cache_bytes[layer]
        elif kind == adapters.EXPERTS:
            one, one_bytes = _expert_weights(mods)
            k = config.num_experts_per_tok
            row["prefill_flops"], row["flops"] = 2 * k * one * tokens, 2 * k * one
            row["read_bytes"] = one_bytes * len(set(experts[layer]))
        else:  # MLP, router: all their weights per token; norms, positions: no matrix product
            row["prefill_flops"], row["flops"] = 2 * weights * tokens, 2 * weights
        rows.append(row)
    return pd.DataFrame(rows)


def _median_ms(timings: list[dict[str, float]], names) -> list[float]:
    return [median(ms.get(name, 0.0) for ms in timings) for name in names]


@torch.inference_mode()
def look_inside(
    model,
    token_ids: list[int],
    followed_id: int | None = None,
    decode_repeats: int = DECODE_REPEATS,
    rank_positions: int = RANK_POSITIONS,
) -> Inside:
    """Everything the page shows for the pass that reads `token_ids` (the last one is the new token).
    `followed_id`: the token to follow through the layers (default: the model's top token)."""
    if not token_ids:
        raise ValueError("The context has no tokens")
    adapter, ids = adapter_for(model), list(token_ids)
    modules = adapter.part_modules()

    # 1. prefill: the whole context in one pass, timed part by part; its hidden states feed every view
    prefill = TransformersForward(model, None)
    out, prefill_ms = prefill.look(ids, modules)
    hidden = [h[0] for h in out.hidden_states]  # layers + 1 of [tokens, hidden]; the last one already normed
    logits = out.logits[0, -1].float()
    cache_bytes = prefill.cache_layer_bytes()

    # 2. decode: the last token again on a cache of the others (the step engine's decode step), timed part by part
    decode = TransformersForward(model, None)
    if len(ids) > 1:
        decode.look(ids[:-1], {})
    decode_ms, pass_ms = [], []
    for _ in range(max(1, decode_repeats)):
        decode.crop_to(len(ids) - 1)
        with Stopwatch() as watch:
            decode_ms.append(decode.look(ids[-1:], modules)[1])
        pass_ms.append(watch.ms)

    # 3. the logit lens of the new token, the rank of each next token over the last positions, the attention
    def read_out(rows: list[torch.Tensor]) -> torch.Tensor:  # the last hidden state is normed: the head alone
        return torch.cat([adapter.read_out(torch.stack(rows[:-1])), adapter.output_layer(rows[-1][None]).float()])

    lens_probs = torch.softmax(read_out([h[-1] for h in hidden]), dim=-1)
    followed = int(logits.argmax()) if followed_id is None else int(followed_id)
    start = max(0, len(ids) - rank_positions)
    targets = ids[start + 1 :] + [followed]
    stream = read_out([h[start:] for h in hidden])  # [layers + 1, positions, vocab]
    target_logits = stream.gather(-1, torch.tensor(targets).view(1, -1, 1).expand(stream.shape[0], -1, 1))
    attention = torch.stack([adapter.attention_weights(i, hidden[i]) for i in range(len(hidden) - 1)])
    experts = None
    if getattr(out, "router_logits", None):
        k = model.config.num_experts_per_tok
        experts = [r.view(len(ids), -1)[-1].topk(k).indices.tolist() for r in out.router_logits]

    parts = part_table(model, adapter, len(ids), experts, cache_bytes)
    parts["prefill_ms"] = _median_ms([prefill_ms], parts["name"])
    parts["decode_ms"] = _median_ms(decode_ms, parts["name"])
    shape = adapter.shape
    groups = shape.attention_heads // shape.kv_heads
    return Inside(
        token_ids=ids,
        followed_id=followed,
        lens_probs=lens_probs,
        rank_positions=list(range(start, len(ids))),
        rank_targets=targets,
        ranks=(stream > target_logits).sum(-1),
        attention=attention,
        kv_groups=[list(range(g * groups, (g + 1) * groups)) for g in range(shape.kv_heads)],
        cache_bytes_per_layer=cache_bytes,
        parts=parts,
        logits=logits,
        experts=experts,
        decode_pass_ms=tuple(pass_ms),
        plain_decode=time_decode_step(model, len(ids) - 1, repeats=PLAIN_REPEATS) if len(ids) > 1 else None,
    )


def part_groups(parts: pd.DataFrame) -> pd.DataFrame:
    """The parts summed by kind (all layers' attention together, ...), in the order a pass runs them."""
    order = {kind: i for i, kind in enumerate(parts.kind.drop_duplicates())}
    columns = ["flops", "prefill_flops", "bytes", "read_bytes", "prefill_ms", "decode_ms"]
    groups = parts.groupby("kind", sort=False)[columns].sum().reset_index().rename(columns={"kind": "group"})
    return groups.sort_values("group", key=lambda s: s.map(order)).reset_index(drop=True)


@dataclass(frozen=True)
class PublicShares:
    """A public model's decode step by FLOPs: output layer, the layers' matrix products, attention over the cache."""

    name: str
    vocab_size: int
    hidden_size: int
    contexts: tuple[int, ...]
    output_share: tuple[float, ...]  # per context
    attention_share: tuple[float, ...]


def public_shares(entry: dict, contexts: tuple[int, ...]) -> PublicShares:
    """From a published config (`assets/public_models.json`): 2 x the active weights outside the embedding
    tables (norms and biases included: a few parts in ten thousand), attention 4 x heads x head_dim per position
    attended in each layer (windows respected), the output layer 2 x vocabulary x hidden, at each context."""
    shape = model_config.from_public_entry(entry)
    tables = shape.vocab_size * shape.hidden_size * (1 if entry["tied_embeddings"] else 2)
    layers = 2 * (entry["active_parameters"] - tables)
    output = 2 * shape.vocab_size * shape.hidden_size
    outputs, attentions = [], []
    for context in contexts:
        attention = 4 * shape.attention_heads * shape.head_dim * sum(shape.cached_tokens_per_layer(context))
        total = layers + attention + output
        outputs.append(output / total)
        attentions.append(attention / total)
    return PublicShares(entry["name"], shape.vocab_size, shape.hidden_size, contexts, tuple(outputs), tuple(attentions))
