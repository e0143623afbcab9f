"""Inside one forward pass: what each layer would predict, what each head read, where the time goes.

    inside = look_inside(model, token_ids)        # one prefill pass, then the last token as a decode pass
    inside.lens_probs[layer]                      # [vocab]: layer's residual stream read as a prediction
    inside.attention[layer, head]                 # [tokens]: the new token's attention weights
    inside.parts                                  # FLOPs, weight bytes and measured ms of every part

Every pass runs through the forward boundary (`TransformersForward.look`: transformers' own forward, its hidden
states, each part timed by hooks). The hooks go on a twin of the model that shares its weights (a copy of the module
tree, not of the tensors), so the shared cached model is never changed and another session's pass on it never
reaches these clocks. Logit lens (nostalgebraist 2020): the residual stream after layer i through the model's own
final norm and output layer; only the last layer was trained to be read that way.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from statistics import median

import pandas as pd
import torch

from inference.core import model_config
from inference.core.forward import TransformersForward
from inference.core.measuring import Stopwatch, Timing, time_decode_step
from inference.lessons.inside import adapters
from inference.lessons.inside.adapters import Adapter, UnsupportedModel

DECODE_REPEATS = 5  # decode passes timed (median per part): one takes ~5 ms on the bundled model
RANK_POSITIONS = 16  # positions of the lens heat map, ending at the new token (their ranks stay legible)
PLAIN_REPEATS = 10  # plain decode steps timed beside the walk (measuring.time_decode_step), after its warm-ups

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

    def lens_top(self, layer: int, count: int) -> tuple[list[int], list[float]]:
        probs, ids = torch.topk(self.lens_probs[layer], count)
        return ids.tolist(), probs.tolist()

    def followed_probs(self) -> list[float]:
        return self.lens_probs[:, self.followed_id].tolist()

    def lens_table(self, name, top: int = 3) -> pd.DataFrame:
        """One row per layer (0 = embeddings): its top tokens with their probabilities, and the followed token's."""
        rows = []
        for layer, followed in enumerate(self.followed_probs()):
            ids, probs = self.lens_top(layer, top)
            rows.append(
                {"layer": layer} | {f"#{i + 1}": f"{name(t)}  {p:.0%}" for i, (t, p) in enumerate(zip(ids, probs))}
            )
            rows[-1]["followed"] = followed
        return pd.DataFrame(rows)

    def kv_table(self, layer: int) -> pd.DataFrame:
        """Per K/V head of `layer`: the query heads that read it and the bytes of its cached keys and values."""
        return pd.DataFrame(
            {
                "K/V head": range(len(self.kv_groups)),
                "read by query heads": [", ".join(map(str, g)) for g in self.kv_groups],
                "cached tokens": self.context,
                "K and V bytes": self.cache_bytes_per_layer[layer] // len(self.kv_groups),
            }
        )


def _held_bytes(modules, seen: set[int]) -> int:
    """Bytes of the tensors of `modules` not yet in `seen` (each tensor counts once: tied tables)."""
    tensors = {p.data_ptr(): p for m in modules for p in m.parameters() if p.data_ptr() not in seen}
    seen.update(tensors)
    return sum(p.numel() * p.element_size() for p in tensors.values())


def _matmul_weights(modules) -> int:
    """Weights of the matrix products in `modules`: nn.Linear / GPT-2 Conv1D / an MoE router's weight."""
    kinds = lambda m: (
        isinstance(m, torch.nn.Linear) or type(m).__name__ in ("Conv1D",) or type(m).__name__.endswith("TopKRouter")
    )
    return sum(m.weight.numel() for module in modules for m in module.modules() if kinds(m))


def part_table(model, adapter, tokens: int, experts: list[list[int]] | None, cache_bytes: list[int]) -> pd.DataFrame:
    """FLOPs (flops.py's rules, part by part) of a prefill over `tokens` and of the decode pass of the last one,
    weight bytes held (each tensor once: a tied embedding table under the output layer, which reads all of it)
    and bytes a decode pass reads (one embedding row, the chosen experts, the layer's KV cache)."""
    shape, k = adapter.shape, getattr(model.config, "num_experts_per_tok", None)
    per_position = 2 * 2 * shape.attention_heads * shape.head_dim  # q.k and the weighted sum of v
    modules = adapter.part_modules()
    seen: set[int] = set()
    held = {adapters.OUTPUT: _held_bytes(modules[adapters.OUTPUT], seen)}
    held |= {name: _held_bytes(mods, seen) for name, mods in modules.items() if name != adapters.OUTPUT}
    rows = []
    for name, mods in modules.items():
        layer, kind = (int(name.split()[1]), name.split(" ", 2)[2]) if name.startswith("layer ") else (None, name)
        weights, read = _matmul_weights(mods), held[name]
        prefill, decode = 2 * weights * tokens, 2 * weights  # MLP, router: every weight per token; norms: none
        if kind == adapters.OUTPUT:
            prefill = decode = 2 * model.get_output_embeddings().weight.numel()  # the last position only
        elif kind == adapters.EMBEDDING:
            prefill = decode = 0
            read = sum(m.weight[0].numel() * m.weight.element_size() for m in mods)  # one row of each table
        elif kind == adapters.ATTENTION:
            window = shape.sliding_window if shape.layer_types[layer] == model_config.SLIDING else tokens
            attended = [min(p + 1, window) for p in range(tokens)]
            prefill, decode = prefill + per_position * sum(attended), decode + per_position * attended[-1]
            read += cache_bytes[layer]
        elif kind == adapters.EXPERTS:  # Mixtral layout: every expert's tensors stacked, [experts, ...]
            tensors = list(mods[0].parameters(recurse=False))
            count = tensors[0].shape[0]
            one = sum(p.numel() for p in tensors) // count
            prefill, decode = 2 * k * one * tokens, 2 * k * one
            read = sum(p.numel() * p.element_size() for p in tensors) // count * len(set(experts[layer]))
        rows.append(
            dict(
                name=name,
                kind=kind,
                layer=layer,
                flops=decode,
                prefill_flops=prefill,
                bytes=held[name],
                read_bytes=read,
            )
        )
    return pd.DataFrame(rows)


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
    Adapter(model)  # UnsupportedModel before anything is copied
    twin = copy.deepcopy(model, {id(t): t for t in (*model.parameters(), *model.buffers())})  # same tensors
    adapter, ids = Adapter(twin), list(token_ids)
    modules = adapter.part_modules()

    # 1. prefill: the whole context in one pass, timed part by part; its hidden states feed every view
    prefill = TransformersForward(twin, None)
    out, prefill_ms = prefill.look(ids, modules)
    hidden = [h[0] for h in out.hidden_states]  # layers + 1 of [tokens, hidden]; the last one already normed
    logits = out.logits[0, -1].float()
    cache_bytes = prefill.cache_layer_bytes()

    # 2. decode: the last token again on a cache of the others (the step engine's decode step), timed part by part
    decode = TransformersForward(twin, None)
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

    parts = part_table(twin, adapter, len(ids), experts, cache_bytes)
    parts["prefill_ms"] = [prefill_ms.get(name, 0.0) for name in parts.name]
    parts["decode_ms"] = [median(ms.get(name, 0.0) for ms in decode_ms) for name in parts.name]
    groups = adapter.shape.attention_heads // adapter.shape.kv_heads
    return Inside(
        token_ids=ids,
        followed_id=followed,
        lens_probs=lens_probs,
        rank_positions=list(range(start, len(ids))),
        rank_targets=targets,
        ranks=(stream > target_logits).sum(-1),
        attention=attention,
        kv_groups=[list(range(g * groups, (g + 1) * groups)) for g in range(adapter.shape.kv_heads)],
        cache_bytes_per_layer=cache_bytes,
        parts=parts,
        logits=logits,
        experts=experts,
        decode_pass_ms=tuple(pass_ms),
        plain_decode=time_decode_step(model, len(ids) - 1, repeats=PLAIN_REPEATS) if len(ids) > 1 else None,
    )


def part_groups(parts: pd.DataFrame) -> pd.DataFrame:
    """The parts summed by kind (all layers' attention together, ...), in the order a pass runs them."""
    columns = ["flops", "prefill_flops", "bytes", "read_bytes", "prefill_ms", "decode_ms"]
    return parts.groupby("kind", sort=False)[columns].sum().reset_index().rename(columns={"kind": "group"})


def public_shares(entry: dict, contexts: tuple[int, int]) -> dict:
    """A published model's decode step by FLOPs (`assets/public_models.json`): 2 x the active weights outside the
    embedding tables (norms and biases included: a few parts in ten thousand), attention 4 x heads x head_dim per
    position attended in each layer (windows respected), the output layer 2 x vocabulary x hidden."""
    shape = model_config.from_public_entry(entry)
    output = 2 * shape.vocab_size * shape.hidden_size
    layers = 2 * entry["active_parameters"] - output * (1 if entry["tied_embeddings"] else 2)
    attention = [4 * shape.attention_heads * shape.head_dim * sum(shape.cached_tokens_per_layer(c)) for c in contexts]
    return dict(
        name=entry["name"], vocab=shape.vocab_size, hidden=shape.hidden_size, first=contexts[0], last=contexts[-1],
        output=output / (layers + attention[0] + output),
        attention_first=attention[0] / (layers + attention[0] + output),
        attention_last=attention[-1] / (layers + attention[-1] + output),
    )  # fmt: skip
