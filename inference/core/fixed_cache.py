"""A KV cache allocated once, for the fused C pass: the forward behind speculative decoding and its plain baseline.

Why: transformers' `DynamicCache` appends a pass's new keys and values with `torch.cat` of each layer's whole past,
and the fused pass (`fused_step.forward`) also collects pointers to every layer's tensors and checks the cache's
layers on each call. For the bundled 6-layer model that Python costs ~0.3 ms beside a ~1.0 ms C pass, and for the
2-layer draft ~0.1 ms beside ~0.07 ms (Intel Xeon VM, one thread, 2026-12-02; `python -m inference.bench`'s
speculative keys). Here every layer's keys and values live in one float32 block, a pass writes its new rows in place,
and a crop is a length: the same C pass on the same numbers, so the logits equal the `DynamicCache` path's bit for
bit (tests).

`FixedCacheForward` starts on `FastDecodeForward` (or `ShortlistForward`): the prompt goes through the same passes
as before. Once its cache holds text and the fused pass can run, it moves the cache into a `FixedKV` and runs every
later pass of 1 to `small_matmul.MAX_ROWS` tokens (more in chunks of that many) in C on it. A pass that the C pass
does not run the same way (several tokens through `logits`, which is transformers' arithmetic) moves the cache back
first. The Generate page's trace keeps `DynamicCache`: its KV lesson reads transformers' own tensors.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass

import numpy as np
import torch
from transformers import DynamicCache

from inference.core import fast_decode, kv_cache, small_matmul
from inference.core.forward import DECODE, FastDecodeForward, Forward, ForwardPass, ShortlistForward

FIRST_CAPACITY = 256  # positions the block holds at first; it doubles as the text grows (up to the model's context)


class FixedKV:
    """Every layer's keys and values in one float32 block [2 (K, V), layers, kv_heads, capacity, head_dim], and the
    pointers the C pass reads them through. The first `length` positions hold the text."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int):
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.length = 0
        self.block = np.zeros((2, layers, kv_heads, 0, head_dim), np.float32)
        self._allocate(capacity)

    @classmethod
    def of(cls, cache: DynamicCache, head_dim: int, capacity: int) -> FixedKV:
        """A copy of a `DynamicCache`'s float32 keys and values."""
        tensors = kv_cache.layer_tensors(cache)
        length = int(tensors[0][0].shape[-2])
        fixed = cls(len(tensors), int(tensors[0][0].shape[1]), head_dim, max(capacity, length))
        for index, (keys, values) in enumerate(tensors):
            fixed.block[0, index, :, :length] = keys[0].numpy()
            fixed.block[1, index, :, :length] = values[0].numpy()
        fixed.length = length
        return fixed

    @property
    def capacity(self) -> int:
        return self.block.shape[3]

    def _allocate(self, capacity: int) -> None:
        block = np.zeros((2, self.layers, self.kv_heads, capacity, self.head_dim), np.float32)
        block[:, :, :, : self.length] = self.block[:, :, :, : self.length]
        self.block = block
        base, layer_bytes = block.ctypes.data, block[0, 0].nbytes
        pointers = ctypes.c_void_p * self.layers
        self.past = (
            pointers(*[base + index * layer_bytes for index in range(self.layers)]),
            pointers(*[base + (self.layers + index) * layer_bytes for index in range(self.layers)]),
            (ctypes.c_int64 * self.layers)(*[capacity * self.head_dim] * self.layers),  # floats between K/V heads
        )
        self._scratch: dict[int, tuple[np.ndarray, tuple[int, int]]] = {}

    def make_room(self, n: int) -> None:
        """Room for `n` more positions: the block doubles (or more) when they do not fit, its pointers made again."""
        if self.length + n > self.capacity:
            self._allocate(max(2 * self.capacity, self.length + n))

    def scratch(self, n: int) -> tuple[np.ndarray, tuple[int, int]]:
        """Where a pass of `n` tokens writes its new keys and values ([2, layers, kv_heads, n, head_dim], made once
        per n), and the two addresses the C pass takes; room for them in the block first."""
        self.make_room(n)
        made = self._scratch.get(n)
        if made is None:
            rows = np.empty((2, self.layers, self.kv_heads, n, self.head_dim), np.float32)
            made = self._scratch[n] = (rows, (rows[0].ctypes.data, rows[1].ctypes.data))
        return made

    def to_cache(self, config) -> DynamicCache:
        """A transformers cache holding a copy of the text's keys and values."""
        cache = DynamicCache(config=config)
        for index in range(self.layers):
            keys = torch.from_numpy(self.block[0, index, :, : self.length].copy()).unsqueeze(0)
            values = torch.from_numpy(self.block[1, index, :, : self.length].copy()).unsqueeze(0)
            cache.update(keys, values, index)
        return cache


@dataclass(frozen=True)
class DraftRound:
    """What `FixedCacheForward.draft_round` drafted: the tokens, each one's [vocab] logits row and (sampled) the
    float64 distribution it was drawn from, and each pass's seconds (the catch-up's first when it ran in the call,
    then one per token but the last, which is not fed). The rows are views of the round's `RoundBuffers`."""

    tokens: list[int]
    logits: torch.Tensor
    q: torch.Tensor | None
    pass_seconds: list[float]


class RoundBuffers:
    """The memory a draft's round in C reads and writes, made once for a γ and a vocabulary and reused every round,
    with its addresses and memoryviews: right after a pass each allocation, torch view or numpy `.ctypes` cost
    ~20-80 us (Intel Xeon VM, 2026-12-03, caches cold), a dozen of them a round. A round's logits and q are views of
    it, valid until the next round that uses the same buffers."""

    def __init__(self, gamma: int, vocab: int, scored: int):
        self.gamma = gamma
        self.logits = torch.empty(gamma, vocab)
        self.q = torch.empty(gamma, vocab, dtype=torch.float64)
        self.logit_rows = [self.logits[:count] for count in range(gamma + 1)]
        self.q_rows = [self.q[:count] for count in range(gamma + 1)]
        self.tokens, self.seconds = np.empty(gamma, np.int64), np.zeros(gamma + 1)
        self.uniforms = np.zeros(gamma)
        scratch = (np.empty(scored, np.float32), np.empty(2 * vocab, np.int64))  # shortlist logits, draw's ids
        self._held = scratch
        self.token_items, self.second_items = memoryview(self.tokens), memoryview(self.seconds)
        self.uniform_items, self.uniform_address = memoryview(self.uniforms), self.uniforms.ctypes.data
        # fused_step.c draft_round's outputs, in its order: tokens, logits, q, pass seconds, shortlist logits, ids
        self.outputs = (
            self.tokens.ctypes.data,
            self.logits.data_ptr(),
            self.q.data_ptr(),
            self.seconds.ctypes.data,
            scratch[0].ctypes.data,
            scratch[1].ctypes.data,
        )


class FixedCacheForward(Forward):
    """`FastDecodeForward`'s passes (`ShortlistForward`'s with `rows`: the draft scoring a shortlist of token ids) on
    a `FixedKV` once the prompt is in (see the module docstring). The same interface: `logits`, `few_tokens`,
    `next_pass`, `crop_to`, `cached_tokens`, `cache` (a copy as transformers' cache, for tests and pages)."""

    def __init__(self, model, tokenizer, rows=None):
        self.model = model
        self.dynamic = FastDecodeForward(model, tokenizer) if rows is None else ShortlistForward(model, tokenizer, rows)
        self.rows = getattr(self.dynamic, "rows", None)
        self.context, self.eos_ids = self.dynamic.context, self.dynamic.eos_ids
        self.vocab_size, self.kv_shape = self.dynamic.vocab_size, self.dynamic.kv_shape
        self.fixed: FixedKV | None = None
        self._fused = None
        if self.rows is not None:
            self._rows = self.rows.numpy()
            self._widened = np.full((small_matmul.MAX_ROWS, self.vocab_size), -np.inf, np.float32)
        self._rows_address = self._rows.ctypes.data if self.rows is not None else None
        self._feed = np.empty(small_matmul.MAX_ROWS, np.int64)  # a pass's token ids, for C
        self._feed_items, self._feed_address = memoryview(self._feed), self._feed.ctypes.data
        self._stops: dict = {}  # stop ids -> their array, for `draft_round`

    # -- the cache ---------------------------------------------------------------------------------------------------

    @property
    def cached_tokens(self) -> int:
        return self.fixed.length if self.fixed is not None else self.dynamic.cached_tokens

    @property
    def cache(self) -> DynamicCache:
        return self.fixed.to_cache(self.model.config) if self.fixed is not None else self.dynamic.cache

    def cache_layer_bytes(self) -> list[int]:
        """Bytes of each layer's keys and values for the text held, read from the arrays (the block's positions past
        the text are allocated, not yet used)."""
        if self.fixed is None:
            return self.dynamic.cache_layer_bytes()
        held = self.fixed.block[:, :, :, : self.fixed.length]
        return [held[0, layer].nbytes + held[1, layer].nbytes for layer in range(self.fixed.layers)]

    def crop_to(self, length: int) -> None:
        if self.fixed is None:
            self.dynamic.crop_to(length)
        elif length <= 0 or not self._fused.still_valid():
            self._leave_fixed()
            self.dynamic.crop_to(length)
        else:
            self.fixed.length = min(self.fixed.length, length)

    def _adopt(self) -> None:
        """Move the cache into a FixedKV when the fused pass can run on it (else stay on the DynamicCache)."""
        cache = self.dynamic.cache
        if self.dynamic.cached_tokens == 0:
            return
        fused = fast_decode.fused_plan(self.model, cache, self.rows)
        if fused is None:
            return
        capacity = min(max(FIRST_CAPACITY, 2 * self.dynamic.cached_tokens), self.context)
        self.fixed, self._fused = FixedKV.of(cache, fused.head_dim, capacity), fused
        self._embed, self._rope = fast_decode.lean_plan_parts(self.model)
        self._embed = self._embed.detach()
        self._embed_address = self._embed.data_ptr()
        self.dynamic.cache = DynamicCache(config=self.model.config)  # the block holds the text now

    def _leave_fixed(self) -> None:
        self.dynamic.cache = self.fixed.to_cache(self.model.config)
        self.fixed = self._fused = None

    # -- passes ------------------------------------------------------------------------------------------------------

    def _pass(self, ids: list[int], keep: int) -> torch.Tensor:
        """The fused pass of `ids` (1 to MAX_ROWS) on the block: [keep, vocab] logits (every token's: -inf outside a
        shortlist)."""
        n, fixed = len(ids), self.fixed
        if fixed.length + n > self.context:
            raise ValueError(f"{fixed.length + n} positions do not fit the model's context of {self.context}")
        for i, token in enumerate(ids):
            self._feed_items[i] = token
        new_kv = fixed.scratch(n)[1]
        cos, signed_sin, table = self._rope.addresses(fixed.length, n)
        logits = torch.empty(keep, self._fused.vocab)
        status = small_matmul.library().block_pass(
            self._fused.shape_ref, self._fused.weights, self._embed_address, self._feed_address, n, fixed.length,
            cos, signed_sin, *fixed.past, *new_kv, keep, logits.data_ptr(),
        )  # fmt: skip
        del table  # held until C read the rows
        if status != 0:
            raise RuntimeError(f"block_pass failed ({status}) for {n} tokens, keep {keep}")
        fixed.length += n  # C wrote the keys and values into the block
        if self.rows is None:
            return logits
        widened = self._widened[:keep].copy()  # -inf everywhere, then the shortlist's columns
        widened[:, self._rows] = logits.numpy()
        return torch.from_numpy(widened)

    def draft_round_ready(self, positions: int) -> bool:
        """`draft_round` can run: the text is on the block, the model has not moved, and `positions` more fit."""
        fixed = self.fixed
        return fixed is not None and self._fused.still_valid() and fixed.length + positions <= self.context

    def draft_round(
        self,
        start: torch.Tensor | list[int],
        gamma: int,
        temperature: float,
        uniforms,
        stop_ids,
        buffers: RoundBuffers | None = None,
    ) -> DraftRound | None:
        """A draft's round in one C call (fused_step.c's `draft_round`). `start` is either the tokens the draft has
        not seen yet (1 to MAX_ROWS: the catch-up pass runs in the call) or, after a catch-up already run, the
        [vocab] logits of the first drafted token. Then up to `gamma` tokens, each chosen from its own row
        (temperature 0: the first largest logit; else the temperature's softmax, drawn with `uniforms[i]` as
        `run.draw` draws: `uniforms` γ numbers, or the address of γ float64s the call reads, one per drafted
        token), with a one-token fused pass between, stopping after a token of `stop_ids`. The same passes
        and the same choices as the Python loop, bit for bit (tests). None where the block is not in use or the feed
        is longer than one pass (the caller loops in Python). `buffers` (from `round_buffers`) are reused by a caller
        that drafts round after round; without them the round gets its own."""
        given_logits = isinstance(start, torch.Tensor)
        fed = 0 if given_logits else len(start)
        if not self.draft_round_ready(fed + gamma) or not (given_logits or 1 <= fed <= small_matmul.MAX_ROWS):
            return None
        made = buffers if buffers is not None and buffers.gamma == gamma else self.round_buffers(gamma)
        fixed, vocab = self.fixed, self.vocab_size
        fixed.make_room(fed + gamma)
        new_kv = fixed.scratch(max(fed, 1))[1]  # a one-token pass writes the start of the same rows
        cos, signed_sin, table = self._rope.addresses(fixed.length, fed + gamma)
        for i, token in enumerate(() if fed == 0 else start):
            self._feed_items[i] = token
        uniform_address = made.uniform_address
        if temperature > 0 and isinstance(uniforms, int):  # the address of the next γ of a stream
            uniform_address = uniforms
        elif temperature > 0:
            for i in range(gamma):
                made.uniform_items[i] = uniforms[i]
        stop_ids = frozenset(stop_ids)
        stops = self._stops.get(stop_ids)
        if stops is None:
            stops = self._stops[stop_ids] = np.asarray(sorted(stop_ids), dtype=np.int64)
        tokens, logits, q, seconds, short, ids = made.outputs
        first = None if fed else (start if start.is_contiguous() else start.contiguous())  # held until C read it
        count = small_matmul.library().draft_round(
            self._fused.shape_ref, self._fused.weights, self._embed_address, None if fed else first.data_ptr(),
            self._feed_address if fed else None, fed, fixed.length, cos, signed_sin, *fixed.past, *new_kv, gamma,
            temperature, uniform_address, self._rows_address, vocab, stops.ctypes.data, len(stops), tokens,
            logits, q if temperature > 0 else None, seconds, short, ids,
        )  # fmt: skip
        del table, first  # held until C read them
        if count < 0:
            raise RuntimeError(f"draft_round failed ({count})")
        fixed.length += fed + count - 1  # the catch-up, then every drafted token but the last
        timed = count - 1 + (1 if fed else 0)
        return DraftRound(
            made.token_items[:count].tolist(),
            made.logit_rows[count],
            made.q_rows[count] if temperature > 0 else None,
            made.second_items[:timed].tolist(),
        )

    def round_buffers(self, gamma: int) -> RoundBuffers:
        """Memory for `draft_round`s of `gamma` tokens on this forward."""
        return RoundBuffers(gamma, self.vocab_size, self._fused.vocab)

    def _chunks(self, ids: list[int], keep: int) -> torch.Tensor:
        """More than MAX_ROWS tokens as passes of at most that many (`fast_decode._fused_chunks`' rule)."""
        rows, first_kept = [], len(ids) - keep
        for start in range(0, len(ids), small_matmul.MAX_ROWS):
            chunk = ids[start : start + small_matmul.MAX_ROWS]
            wanted = min(len(chunk), start + len(chunk) - first_kept)
            logits = self._pass(chunk, max(wanted, 1))
            if wanted > 0:
                rows.append(logits)
        return torch.cat(rows)

    def logits(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        """As `FastDecodeForward.logits`: one token through the fused pass; several through transformers' arithmetic
        (on the DynamicCache: the block moves back first)."""
        if self.fixed is not None and len(ids) == 1 and keep == 1:
            return self._pass(ids, 1)
        if self.fixed is not None:
            self._leave_fixed()
        out = self.dynamic.logits(ids, keep)
        self._adopt()
        return out

    def few_tokens(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        """As `FastDecodeForward.few_tokens`: a speculative pass of a few tokens (a verify pass, a draft catching up)."""
        if self.fixed is None:
            out = self.dynamic.few_tokens(ids, keep)
            self._adopt()
            return out
        if not 1 <= keep <= len(ids):
            raise ValueError(f"Feed at least one token and keep 1 to {len(ids)} positions, not {keep}")
        if len(ids) > small_matmul.MAX_ROWS:
            return self._chunks(list(ids), keep)
        return self._pass(list(ids), keep)

    def next_pass(self, text_ids: list[int], phase: str) -> ForwardPass:
        """The step engine's pass (`inference.core.run.Trace`): a decode step of one token on the block, anything
        else (a prompt, several tokens after a rewind) as `FastDecodeForward.next_pass` computes it."""
        ids = text_ids[self.cached_tokens :]
        if self.fixed is None or phase != DECODE or len(ids) != 1:
            if self.fixed is not None:
                self._leave_fixed()
            out = self.dynamic.next_pass(text_ids, phase)
            self._adopt()
            return out
        start = time.perf_counter()
        logits = self._pass(ids, 1)[0]
        forward_ms = (time.perf_counter() - start) * 1000
        return ForwardPass(
            logits=logits,
            forward_ms=forward_ms,
            phase=phase,
            tokens_in_forward=1,
            cache_tokens=self.cached_tokens,
            cache_bytes=sum(self.cache_layer_bytes()),
        )
