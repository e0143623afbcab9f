"""The prefix cache of llama-server: a request that starts with tokens the server still holds skips their prefill.

What this build does (llama.cpp 0c1e570, read in `tools/server/server-context.cpp` and checked by the engine
tests):
- With `"cache_prompt": true` a slot keeps the keys and values of its last prompt (and reply); the next request
  it serves reuses the longest common prefix and evaluates only the rest. The answer's `timings.cache_n` counts the
  reused tokens, `timings.prompt_n` the evaluated ones (`cache_prompt: false` evaluates everything).
- A request goes to the idle slot whose tokens share the largest fraction of its prompt (above 10%,
  `--slot-prompt-similarity`), else to the least recently used slot.
- Beside the slots, a prompt cache in RAM (`--cache-ram`, MiB, default 8,192; 0 turns it off): before a slot is
  given to another prompt, its state is copied there, and the best-matching saved state is copied back into the
  slot. When the cache is full, the oldest saved prompt is dropped. So on this build a conversation that loses
  its slot is not re-evaluated while the RAM cache still holds it; with `--cache-ram 0`, or a RAM cache too small
  for every conversation, it is.

Timing: one token asked per request (so the time to first token is the round trip, prefill and nothing else), on a
fresh server warmed up by one short request. The arithmetic beside it: the prefill FLOPs the cached tokens did not
cost (`prefill_flops`), and what a provider's discount for cached input would make of the measured token counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from inference.core.measuring import Progress, filler_prompt
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.engine_internals.kv_precision import kv_bytes_per_token
from inference.lessons.serving.roofline import ServedModel

WARM_UP_IDS = [0, 1, 2, 3]
DEFAULT_CACHE_RAM_MIB = 8192  # common.h's cache_ram_mib
SLOT_SIMILARITY = 0.1  # common.h's slot_prompt_similarity: the share of a prompt a slot must hold to be picked
PREFIX_SEED = 1000  # filler prompts: what the tokens say does not change the arithmetic or the cache
# (length, seed) -> token ids: real text on a real model (serving.real_text.text_ids), else filler ids
PromptIds = Callable[[int, int], list[int]]


def prompt_source(vocab: int, real_text_ids: PromptIds | None = None) -> PromptIds:
    """Where the lesson's prompts come from: real text when given, else fixed pseudo-random ids of `vocab`."""
    return real_text_ids or (lambda length, seed: filler_prompt(vocab, length, seed))


def prefill_flops(model: ServedModel, new_tokens: int, cached_tokens: int = 0) -> float:
    """FLOPs of evaluating `new_tokens` prompt tokens after `cached_tokens` already in the cache: 2 per multiplied
    weight per token, and attention over every earlier position (4 x layers x query width per position attended,
    as `roofline.prefill_pass` counts it)."""
    first, last = cached_tokens + 1, cached_tokens + new_tokens  # positions attended by the first and last token
    attended = (first + last) * new_tokens / 2
    return 2 * model.matmul_parameters * new_tokens + 4 * model.layers * model.query_width * attended


def prefill_flops_saved(model: ServedModel, prompt_tokens: int, cached_tokens: int) -> float:
    """What a cache hit of `cached_tokens` of a `prompt_tokens` prompt saves: the cold prefill minus the warm one."""
    return prefill_flops(model, prompt_tokens) - prefill_flops(model, prompt_tokens - cached_tokens, cached_tokens)


@dataclass(frozen=True)
class RequestPlan:
    """What the shared-prefix run will ask of the engine, computed exactly before any server starts."""

    requests: int
    prefix_tokens: int
    own_tokens: int  # after the shared prefix, different in every request
    kv_bytes_per_token: int  # keys and values of one token in every layer, in the engine's float32 cache
    slot_positions: int
    cold_flops: float  # the first request's prefill: every prompt token
    warm_flops: float  # a later request's with the prefix reused: its own tokens, attending to the prefix

    @property
    def prompt_tokens(self) -> int:
        return self.prefix_tokens + self.own_tokens

    @property
    def kv_bytes(self) -> int:
        return self.prompt_tokens * self.kv_bytes_per_token


def request_plan(model: ServedModel, context: int, prefix_tokens: int, own_tokens: int, requests: int) -> RequestPlan:
    """The requests `shared_prefix` sends, their KV-cache bytes and prefill FLOPs, from the model's shapes alone."""
    return RequestPlan(
        requests=requests,
        prefix_tokens=prefix_tokens,
        own_tokens=own_tokens,
        kv_bytes_per_token=kv_bytes_per_token(model.layers, model.kv_width, "f32"),
        slot_positions=context,
        cold_flops=prefill_flops(model, prefix_tokens + own_tokens),
        warm_flops=prefill_flops(model, own_tokens, prefix_tokens),
    )


def input_cost(evaluated_tokens: int, cached_tokens: int, price_per_million: float, cached_discount: float) -> float:
    """Dollars for the input tokens at a price per million, cached tokens billed at (1 - discount) of it."""
    if not 0 <= cached_discount <= 1:
        raise ValueError(f"`cached_discount` has to be between 0 and 1, but is {cached_discount}")
    return (evaluated_tokens + cached_tokens * (1 - cached_discount)) * price_per_million / 1e6


@dataclass(frozen=True)
class Answer:
    """One request as the server and the client saw it."""

    prompt_tokens: int
    cached_tokens: int  # timings.cache_n
    evaluated_tokens: int  # timings.prompt_n
    prompt_ms: float | None  # the server's own prefill time
    ttft_ms: float  # measured here: request sent to its one token parsed
    slot: int | None  # the slot that served it (/slots: the one holding the latest task)
    slot_tokens: tuple[int, ...]  # tokens each slot holds afterwards


def ask(client: EngineClient, prompt_ids: list[int], cache_prompt: bool = True) -> Answer:
    completion = client.complete(prompt_ids, 1, cache_prompt=cache_prompt)
    slots = client.slots()
    served = max((s for s in slots if "id_task" in s), key=lambda s: s["id_task"], default=None)
    return Answer(
        prompt_tokens=len(prompt_ids),
        cached_tokens=completion.timings.cached_tokens,
        evaluated_tokens=completion.timings.prompt_tokens,
        prompt_ms=completion.timings.prompt_ms,
        ttft_ms=completion.timings.round_trip_ms,
        slot=None if served is None else served.get("id"),
        slot_tokens=tuple(int(s.get("n_prompt_tokens", 0)) for s in slots),
    )


def _warm_client(server: llamacpp.LlamaServer) -> EngineClient:
    client = EngineClient(server.url, dialect=LLAMACPP, timeout=600)
    client.complete(WARM_UP_IDS, 1, cache_prompt=False)  # a new server's first pass sets up its buffers
    return client


def _row(answer: Answer, **columns) -> dict:
    return {
        **columns,
        "prompt_tokens": answer.prompt_tokens,
        "cached_tokens": answer.cached_tokens,
        "evaluated_tokens": answer.evaluated_tokens,
        "server_prompt_ms": answer.prompt_ms,
        "ttft_ms": answer.ttft_ms,
        "slot": answer.slot,
    }


def shared_prefix(
    gguf: Path,
    vocab: int,
    prefix_tokens: int,
    suffix_tokens: int,
    requests: int,
    progress: Progress | None = None,
    text_ids: PromptIds | None = None,
) -> pd.DataFrame:
    """`requests` prompts that share their first `prefix_tokens` tokens (a system prompt) and differ in the last
    `suffix_tokens`, sent one after another to one slot: with the cache off, then on (each mode its own prefix, so
    the first request of each is cold). `text_ids` gives real text (a real model); else filler ids."""
    ids, rows = prompt_source(vocab, text_ids), []
    with llamacpp.serve(gguf, parallel=1) as server, _warm_client(server) as client:
        for m, cache_on in enumerate((False, True)):
            prefix = ids(prefix_tokens, PREFIX_SEED + m)
            for i in range(requests):
                if progress is not None:
                    progress(m * requests + i, 2 * requests, f"cache {'on' if cache_on else 'off'}, request {i + 1}")
                prompt = prefix + ids(suffix_tokens, PREFIX_SEED + 100 + i)
                rows.append(_row(ask(client, prompt, cache_on), cache=cache_on, request=i + 1))
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class SlotSetting:
    """How the server is started for the alternating conversations."""

    name: str
    parallel: int
    cache_ram_mib: int

    def server_args(self) -> list[str]:
        return ["--cache-ram", str(self.cache_ram_mib)]


def alternation_settings(longest_state_bytes: float) -> list[SlotSetting]:
    """Fewer slots than conversations with the RAM cache off, big enough for one conversation's saved state but not
    for two (whole MiB, the flag's unit), and at its default; then one slot per conversation."""
    small = max(1, math.ceil(longest_state_bytes / 2**20))
    return [
        SlotSetting("1 slot, RAM cache off (--cache-ram 0)", 1, 0),
        SlotSetting(f"1 slot, RAM cache {small} MiB (one conversation, not two)", 1, small),
        SlotSetting(f"1 slot, RAM cache {DEFAULT_CACHE_RAM_MIB:,} MiB (default)", 1, DEFAULT_CACHE_RAM_MIB),
        SlotSetting("2 slots, RAM cache off", 2, 0),
    ]


def saved_state_bytes(tokens: int, layers: int, kv_width: int) -> float:
    """A slot's state in the RAM cache: its tokens' f32 keys and values, plus a margin for the cells' positions and
    headers `llama_state_seq_get_data` writes beside them (a few bytes per token, a few kB per layer)."""
    return 1.05 * tokens * kv_bytes_per_token(layers, kv_width, "f32") + 65_536


def conversation_prompts(
    vocab: int, prefix_tokens: int, turn_tokens: int, turns: int, seed: int, text_ids: PromptIds | None = None
) -> list[list[int]]:
    """A chat that grows turn by turn: its own prefix, then `turn_tokens` more tokens every turn."""
    ids = prompt_source(vocab, text_ids)
    prompt = ids(prefix_tokens, seed)
    out = []
    for turn in range(turns):
        prompt = prompt + ids(turn_tokens, seed * 100 + turn)
        out.append(prompt)
    return out


def alternating_conversations(
    gguf: Path,
    vocab: int,
    layers: int,
    kv_width: int,
    prefix_tokens: int,
    turn_tokens: int,
    turns: int,
    progress: Progress | None = None,
    text_ids: PromptIds | None = None,
) -> pd.DataFrame:
    """Conversations A and B take turns (A1, B1, A2, B2, ...) on each setting of `alternation_settings`, a fresh
    server each, cache on. The small RAM cache misses as meant while two first-turn states are larger than the
    longest one rounded up to a MiB (a prefix long against its turns)."""
    chats = {
        name: conversation_prompts(vocab, prefix_tokens, turn_tokens, turns, PREFIX_SEED + 10 + k, text_ids)
        for k, name in enumerate("AB")
    }
    longest = prefix_tokens + turns * turn_tokens + 1  # the last turn's prompt and its one reply token
    settings = alternation_settings(saved_state_bytes(longest, layers, kv_width))
    rows, total = [], len(settings) * 2 * turns
    for s, setting in enumerate(settings):
        with (
            llamacpp.serve(gguf, parallel=setting.parallel, extra_args=setting.server_args()) as server,
            _warm_client(server) as client,
        ):
            for turn in range(turns):
                for name, prompts in chats.items():
                    if progress is not None:
                        progress(len(rows), total, f"{setting.name}: conversation {name}, turn {turn + 1}")
                    answer = ask(client, prompts[turn])
                    rows.append(
                        _row(answer, setting=setting.name, order=s, conversation=name, turn=turn + 1)
                        | {"slot_tokens": " / ".join(str(n) for n in answer.slot_tokens)}
                    )
    return pd.DataFrame(rows)
