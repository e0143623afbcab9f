"""The prefix cache of llama-server: a request that starts with tokens the server still holds skips their prefill.

llama.cpp 0c1e570 (`tools/server/server-context.cpp`): with `cache_prompt` a slot keeps its last prompt's keys and
values and reuses the longest common prefix (`timings.cache_n` reused, `prompt_n` evaluated); a request goes to the
idle slot holding the largest share of its prompt (above 10%), else the least recently used; a prompt cache in RAM
(`--cache-ram`, 8,192 MiB by default, 0 off) saves a slot's state before it takes another prompt and copies the best
match back. Each request asks for one token, so its time to first token is the prefill and the round trip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from inference.core.measuring import Progress, filler_prompt
from inference.core.tokens import readable_tokens
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.engine_internals import served
from inference.lessons.engine_internals.kv_precision import kv_bytes_per_token
from inference.lessons.engine_internals.served import EngineModel
from inference.lessons.serving import request_trace
from inference.lessons.serving.roofline import ServedModel

DEFAULT_CACHE_RAM_MIB = 8192  # common.h's cache_ram_mib
SLOT_SIMILARITY = 0.1  # common.h's slot_prompt_similarity: the share of a prompt a slot must hold to be picked
PREFIX_SEED = 1000


def prompt_ids(model: EngineModel):
    """(length, seed) -> token ids: real English in SmolLM2's tokens on the real model, else fixed pseudo-random ids
    of its vocabulary (what they say changes neither the arithmetic nor the cache)."""
    if model.key == served.REAL:
        return request_trace.text_ids
    return lambda length, seed: filler_prompt(model.vocab, length, seed)


def prompt_start(model: EngineModel, prefix_tokens: int, tokens: int = 8) -> list[str] | None:
    """The shared prefix's first tokens on the real model as its tokenizer cut them (spaces as ␣); None elsewhere."""
    if model.key != served.REAL:
        return None
    ids = request_trace.text_ids(min(tokens, prefix_tokens), PREFIX_SEED + 1)
    return readable_tokens(request_trace.real_tokenizer(), ids)


def prompt_opening(model: EngineModel, prefix_tokens: int) -> str | None:
    """The first words of the shared prefix sent on the real model, for the caption under its table."""
    if model.key != served.REAL:
        return None
    return request_trace.opening(request_trace.text_ids(prefix_tokens, PREFIX_SEED + 1))


def prefill_flops(model: ServedModel, new_tokens: int, cached_tokens: int = 0) -> float:
    """FLOPs of evaluating `new_tokens` after `cached_tokens` already cached: 2 per multiplied weight per token and
    attention over every earlier position (4 x layers x query width per position, as `roofline.prefill_pass`)."""
    attended = (2 * cached_tokens + 1 + new_tokens) * new_tokens / 2
    return 2 * model.matmul_parameters * new_tokens + 4 * model.layers * model.query_width * attended


def prefill_flops_saved(model: ServedModel, prompt_tokens: int, cached_tokens: int) -> float:
    """What a hit of `cached_tokens` of a `prompt_tokens` prompt saves: the cold prefill minus the warm one."""
    return prefill_flops(model, prompt_tokens) - prefill_flops(model, prompt_tokens - cached_tokens, cached_tokens)


@dataclass(frozen=True)
class RequestPlan:
    """What the shared-prefix run will ask of the engine, computed exactly before any server starts."""

    requests: int
    prefix_tokens: int
    own_tokens: int  # after the shared prefix, different in every request
    kv_bytes_per_token: int  # one token's keys and values in every layer, float32
    slot_positions: int
    cold_flops: float  # the first request's prefill: every prompt token
    warm_flops: float  # a later one's with the prefix reused

    @property
    def prompt_tokens(self) -> int:
        return self.prefix_tokens + self.own_tokens

    @property
    def kv_bytes(self) -> int:
        return self.prompt_tokens * self.kv_bytes_per_token


def request_plan(model: ServedModel, context: int, prefix_tokens: int, own_tokens: int, requests: int) -> RequestPlan:
    return RequestPlan(
        requests,
        prefix_tokens,
        own_tokens,
        kv_bytes_per_token(model.layers, model.kv_width, "f32"),
        context,
        prefill_flops(model, prefix_tokens + own_tokens),
        prefill_flops(model, own_tokens, prefix_tokens),
    )


def input_cost(evaluated_tokens: int, cached_tokens: int, price_per_million: float, cached_discount: float) -> float:
    """Dollars for the input tokens at a price per million, cached tokens billed at (1 - discount) of it."""
    if not 0 <= cached_discount <= 1:
        raise ValueError(f"`cached_discount` has to be between 0 and 1, but is {cached_discount}")
    return (evaluated_tokens + cached_tokens * (1 - cached_discount)) * price_per_million / 1e6


def ask(client: EngineClient, prompt_ids: list[int], cache_prompt: bool = True, **columns) -> dict:
    """One request for one token: a table row of the server's counts, its prefill time, the time to first token
    measured here, the slot that served it (the one holding the latest task) and the tokens each slot holds."""
    completion = client.complete(prompt_ids, 1, cache_prompt=cache_prompt)
    slots = client.slots()
    served = max((s for s in slots if "id_task" in s), key=lambda s: s["id_task"], default={})
    return {
        **columns,
        "prompt_tokens": len(prompt_ids),
        "cached_tokens": completion.timings.cached_tokens,
        "evaluated_tokens": completion.timings.prompt_tokens,
        "server_prompt_ms": completion.timings.prompt_ms,
        "ttft_ms": completion.timings.round_trip_ms,
        "slot": served.get("id"),
        "slot_tokens": " / ".join(str(int(s.get("n_prompt_tokens", 0))) for s in slots),
    }


def _warm_client(server: llamacpp.LlamaServer) -> EngineClient:
    client = EngineClient(server.url, dialect=LLAMACPP, timeout=600)
    client.complete([0, 1, 2, 3], 1, cache_prompt=False)  # a new server's first pass sets up its buffers
    return client


def shared_prefix(
    model: EngineModel, prefix_tokens: int, suffix_tokens: int, requests: int, progress: Progress | None = None
) -> pd.DataFrame:
    """`requests` prompts sharing their first `prefix_tokens` (a system prompt), each then `suffix_tokens` of its
    own, sent one after another to one slot: cache off, then on (each mode its own prefix, its first request cold)."""
    ids, rows = prompt_ids(model), []
    with llamacpp.serve(served.gguf(model.key), parallel=1) as server, _warm_client(server) as client:
        for m, cache_on in enumerate((False, True)):
            prefix = ids(prefix_tokens, PREFIX_SEED + m)
            for i in range(requests):
                if progress is not None:
                    progress(m * requests + i, 2 * requests, f"cache {'on' if cache_on else 'off'}, request {i + 1}")
                prompt = prefix + ids(suffix_tokens, PREFIX_SEED + 100 + i)
                rows.append(ask(client, prompt, cache_on, cache=cache_on, request=i + 1))
    return pd.DataFrame(rows)


def alternation_settings(longest_state_bytes: float) -> list[tuple[str, int, int]]:
    """(name, slots, --cache-ram MiB): one slot with the RAM cache off, big enough for one conversation's saved
    state but not two, and at its default; then one slot per conversation."""
    small = max(1, math.ceil(longest_state_bytes / 2**20))
    return [
        ("1 slot, RAM cache off (--cache-ram 0)", 1, 0),
        (f"1 slot, RAM cache {small} MiB (one conversation, not two)", 1, small),
        (f"1 slot, RAM cache {DEFAULT_CACHE_RAM_MIB:,} MiB (default)", 1, DEFAULT_CACHE_RAM_MIB),
        ("2 slots, RAM cache off", 2, 0),
    ]


def alternating_conversations(
    model: EngineModel, prefix_tokens: int, turn_tokens: int, turns: int, progress: Progress | None = None
) -> pd.DataFrame:
    """Conversations A and B, each its own prefix growing `turn_tokens` a turn, take turns (A1, B1, A2, ...) on each
    of `alternation_settings`, a fresh server each, cache on."""
    ids, chats = prompt_ids(model), {}
    for k, name in enumerate("AB"):
        seed, prompt, chats[name] = PREFIX_SEED + 10 + k, ids(prefix_tokens, PREFIX_SEED + 10 + k), []
        for turn in range(turns):
            prompt = prompt + ids(turn_tokens, seed * 100 + turn)
            chats[name].append(prompt)
    # a slot's state in the RAM cache: the last turn's f32 keys and values and its one reply token, and a margin for
    # the positions and headers `llama_state_seq_get_data` writes beside them
    longest = prefix_tokens + turns * turn_tokens + 1
    settings = alternation_settings(1.05 * longest * kv_bytes_per_token(model.layers, model.kv_width, "f32") + 65_536)
    rows = []
    for order, (setting, slots, cache_ram) in enumerate(settings):
        args = ["--cache-ram", str(cache_ram)]
        with (
            llamacpp.serve(served.gguf(model.key), parallel=slots, extra_args=args) as server,
            _warm_client(server) as client,
        ):
            for turn in range(turns):
                for name, prompts in chats.items():
                    if progress is not None:
                        progress(
                            len(rows), len(settings) * 2 * turns, f"{setting}: conversation {name}, turn {turn + 1}"
                        )
                    columns = dict(setting=setting, order=order, conversation=name, turn=turn + 1)
                    rows.append(ask(client, prompts[turn], **columns))
    return pd.DataFrame(rows)
