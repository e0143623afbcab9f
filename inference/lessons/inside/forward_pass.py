"""Inside one forward pass: what each layer would predict, what each head read, where the time goes.

    inside = look_inside(model, token_ids)        # one prefill pass, then the last token as a decode pass
    inside.lens_probs[layer]                      # [vocab]: layer's residual stream read as a prediction
    inside.attention[layer, head]                 # [tokens]: the new token's attention weights
    inside.parts                                  # FLOPs, weight bytes and measured ms of every part

The context is walked once as a prefill (timed part by part; its residual streams give the lens
heat map over the last positions); then the last token is taken out of the cache and fed again as
a decode pass, several times (median ms per part). The first decode pass's residual stream gives the
logit lens, and its query against the keys in the cache gives the attention weights. The model is
only called (see `adapters`), and the KV cache is a fresh `DynamicCache` of this call.

Logit lens (nostalgebraist 2020): the residual stream after layer i through the model's own final
norm and output layer. Only the last layer was trained to be read that way; the tuned lens (Belrose
et al. 2023) trains one small map per layer instead and is not used here.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import pandas as pd
import torch
from transformers import DynamicCache

from inference.core import kv_cache, model_config
from inference.core.flops import FlopCount
from inference.core.measuring import Timing, time_decode_step
from inference.lessons.inside import adapters
from inference.lessons.inside.adapters import Clock, UnsupportedModel, adapter_for

DECODE_REPEATS = 5  # decode passes timed (median per part): one takes ~5 ms on the bundled model
PREFILL_REPEATS = 1  # prefill passes timed; the first gives the residual streams (most of the cost)
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
        lens = []
        for layer in range(self.layers + 1):
            ids, probs = self.lens_top(layer)
            lens.append(
                {
                    "layer": layer,
                    "top_ids": ids,
                    "top_probs": probs,
                    "chosen_prob": float(self.lens_probs[layer, argmax]),
                }
            )
        parts = [
            {
                "name": row.name,
                "flops": int(row.flops),
                "bytes": int(row.bytes),
                "decode_ms": float(row.decode_ms),
                "prefill_flops": int(row.prefill_flops),
                "prefill_ms": float(row.prefill_ms),
                "decode_bytes_read": int(row.read_bytes),
            }
            for row in self.parts.itertuples(index=False)
        ]
        return {"context_tokens": self.context, "lens": lens, "attention": self.attention.tolist(), "parts": parts}


def new_cache(model):
    """The cache the step engine uses; for a sliding-window model one that keeps every position (transformers'
    windowed layers drop the oldest key the new token still attends to, which we read back afterwards)."""
    if model_config.SLIDING in model_config.from_config(model.config).layer_types:
        return DynamicCache()
    return DynamicCache(config=model.config)


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


def part_table(model, adapter, tokens: int, experts: list[torch.Tensor] | None, cache_bytes: list[int]) -> pd.DataFrame:
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
            row["read_bytes"] = one_bytes * len(set(experts[layer][-1].tolist()))
        else:  # MLP, router: all their weights per token; norms: no matrix product
            row["prefill_flops"], row["flops"] = 2 * weights * tokens, 2 * weights
        rows.append(row)
    rows.insert(1, {"name": adapters.POSITIONS, "kind": adapters.POSITIONS, "layer": None, "bytes": 0})
    rows[1].update(read_bytes=0, flops=0, prefill_flops=0)
    return pd.DataFrame(rows)


def _median_ms(clocks: list[Clock], names) -> list[float]:
    return [median(clock.ms.get(name, 0.0) for clock in clocks) for name in names]


def _attention_weights(adapter, walked, cache, position: int) -> torch.Tensor:
    """[layers, heads, tokens]: softmax(q . K / sqrt(d)) of the token at `position` of the walked pass, with
    q as the layer's attention made it and K read from the cache that pass wrote (the KV page's cache)."""
    shape = adapter.shape
    groups = shape.attention_heads // shape.kv_heads
    out = []
    for layer, (keys, _) in enumerate(kv_cache.layer_tensors(cache)):
        q = adapter.query(layer, walked, position).float()  # [heads, head_dim]
        k = keys[0].float().repeat_interleave(groups, dim=0)  # [heads, tokens, head_dim]
        scores = torch.einsum("hd,htd->ht", q, k) * adapter.scaling(layer)
        tokens = k.shape[1]
        window = shape.sliding_window if shape.layer_types[layer] == model_config.SLIDING else None
        if window is not None and tokens > window:
            scores[:, : tokens - window] = float("-inf")
        out.append(torch.softmax(scores, dim=-1))
    return torch.stack(out)


@torch.inference_mode()
def look_inside(
    model,
    token_ids: list[int],
    followed_id: int | None = None,
    decode_repeats: int = DECODE_REPEATS,
    prefill_repeats: int = PREFILL_REPEATS,
    rank_positions: int = RANK_POSITIONS,
) -> Inside:
    """Everything the page shows for the pass that reads `token_ids` (the last one is the new token).
    `followed_id`: the token to follow through the layers (default: the model's top token)."""
    if not token_ids:
        raise ValueError("The context has no tokens")
    adapter = adapter_for(model)
    ids = list(token_ids)

    # 1. prefill: the whole context in one pass, timed part by part
    prefill_clocks, cache, prefill = [], None, None
    for _ in range(max(1, prefill_repeats)):
        clock, fresh = Clock(), new_cache(model)
        walked = adapter.walk(ids, fresh, clock)
        prefill_clocks.append(clock)
        if prefill is None:
            prefill, cache = walked, fresh

    # 2. decode: the last token again, on a cache of the others (as the step engine's decode step)
    decode_clocks, decode = [], None
    for _ in range(max(1, decode_repeats)):
        cache.crop(-1)  # transformers crops by a negative count: the last token out
        clock = Clock()
        walked = adapter.walk(ids[-1:], cache, clock)
        decode_clocks.append(clock)
        decode = walked
    # The cache holds the context again, the new token's K and V written by the last decode pass: what it read.
    attention = _attention_weights(adapter, decode, cache, position=0)

    # 3. the logit lens of the new token, and the rank of each next token over the last positions
    residuals = torch.stack([r[-1] for r in decode.residuals])  # [layers + 1, hidden]
    lens_probs = torch.softmax(adapter.read_out(residuals), dim=-1)
    followed = int(decode.logits.argmax()) if followed_id is None else int(followed_id)
    start = max(0, len(ids) - rank_positions)
    positions = list(range(start, len(ids)))
    targets = ids[start + 1 :] + [followed]
    stream = torch.stack([r[start:] for r in prefill.residuals])  # [layers + 1, positions, hidden]
    logits = adapter.read_out(stream)
    target_logits = logits.gather(-1, torch.tensor(targets).view(1, -1, 1).expand(logits.shape[0], -1, 1))
    ranks = (logits > target_logits).sum(-1)

    cache_bytes = kv_cache.measured_bytes_per_layer(cache)
    parts = part_table(model, adapter, len(ids), decode.experts or None, cache_bytes)
    parts["prefill_ms"] = _median_ms(prefill_clocks, parts["name"])
    parts["decode_ms"] = _median_ms(decode_clocks, parts["name"])
    shape = adapter.shape
    groups = shape.attention_heads // shape.kv_heads
    return Inside(
        token_ids=ids,
        followed_id=followed,
        lens_probs=lens_probs,
        rank_positions=positions,
        rank_targets=targets,
        ranks=ranks,
        attention=attention,
        kv_groups=[list(range(g * groups, (g + 1) * groups)) for g in range(shape.kv_heads)],
        cache_bytes_per_layer=cache_bytes,
        parts=parts,
        logits=decode.logits,
        experts=[e[-1].tolist() for e in decode.experts] if decode.experts else None,
        plain_decode=time_decode_step(model, len(ids) - 1, repeats=PLAIN_REPEATS) if len(ids) > 1 else None,
    )


def flop_totals(model, tokens: int) -> tuple[int, int]:
    """(prefill over `tokens`, decode of the last of them): flops.py's totals the parts must add up to."""
    count = FlopCount.of(model)
    return count.prefill(tokens), count.decode(tokens - 1)


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
