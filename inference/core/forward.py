"""The forward pass behind every run: one `Forward` interface, three ways to compute it.

- `TransformersForward`: transformers' own forward on a local model, over the run's `DynamicCache`; a
  Mixture-of-Experts model also returns its routers' logits (collected per call by transformers, so the shared
  model is not changed and concurrent runs stay apart).
- `ShortlistForward`: the same, for a speculative draft whose output layer scores only a shortlist of tokens.
- `RemoteForward` (in `inference.core.remote`, beside the engine it asks): one request to a serving engine,
  whose prompt cache plays the KV cache.

The choice is made once, when a run starts (`inference.core.run.forward_for`); no call site decides again.
A forward holds one run's cache. `next_pass(text_ids, phase)` feeds the tokens of the text its cache has not
seen yet and returns a `ForwardPass` for the run to sample from; `crop_to(length)` forgets every position after
the first `length`. The step engine (`inference.core.run.Trace`) and speculative decoding
(`inference.lessons.speculative.run`) feed their models through these classes only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields

import torch

from inference.core import kv_cache, measuring, model_config
from inference.core.routing import has_experts

PREFILL, DECODE = "prefill", "decode"


def eos_token_ids(model, tokenizer) -> set[int]:
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if ids is None:
        ids = getattr(tokenizer, "eos_token_id", None)
    if ids is None:
        return set()
    return {int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])}


def vocabulary_rows(model) -> int:
    """Rows of the output layer: the tokens each next-token distribution is over."""
    return int(model.get_output_embeddings().weight.shape[0])


def context_limit(config) -> int:
    """Maximum positions of the model, read by the one config reader."""
    return model_config.context_length(config)


@dataclass(frozen=True)
class ServerStep:
    """What a serving engine said about one step's request."""

    returned: int  # token probabilities that came back
    returned_mass: float  # their total probability (1 when complete)
    complete: bool
    server_ms: float | None  # the server's own prompt-evaluation time for this request
    round_trip_ms: float  # measured here, request to parsed answer
    evaluated_tokens: int  # tokens the server ran through the model (after its prompt cache)
    cached_tokens: int  # tokens it reused from its prompt cache
    server_choice: int | None = None  # the token llama-server's own greedy sampler picked

    def frame_columns(self) -> dict:
        """This step's columns in a run's table (`Trace.to_frame`)."""
        return {
            "server_ms": self.server_ms,
            "round_trip_ms": self.round_trip_ms,
            "server_evaluated_tokens": self.evaluated_tokens,
            "server_cached_tokens": self.cached_tokens,
            "returned_probabilities": self.returned,
            "returned_mass": self.returned_mass,
        }


@dataclass(frozen=True)
class ForwardPass:
    """One forward pass's output, waiting to be sampled from."""

    logits: torch.Tensor  # [vocab] float32
    forward_ms: float
    phase: str
    tokens_in_forward: int
    cache_tokens: int
    cache_bytes: int
    reused: bool = False  # kept from before a rewind: no forward pass ran for it now
    router_logits: torch.Tensor | None = None  # [layers, tokens_in_forward, experts] float32 (MoE models)
    server_step: ServerStep | None = None  # what the engine said, when a serving engine ran the pass

    @classmethod
    def kept(cls, record) -> ForwardPass:
        """A recorded step's forward pass, waiting again after a rewind (no pass runs for it now)."""
        return cls(**pass_fields(record), reused=True)


def pass_fields(source) -> dict:
    """What a step record keeps of its forward pass: the fields `ForwardPass` and `StepRecord` share by name."""
    return {f.name: getattr(source, f.name) for f in fields(ForwardPass) if f.name != "reused"}


class Forward(ABC):
    """One run's forward passes and the cache that goes with them. `context`, `eos_ids` and `vocab_size` are what
    the run's checks and stopping rule read; `kv_shape` is None when the cache's tensors are not here."""

    context: int
    eos_ids: set[int]
    vocab_size: int
    kv_shape: kv_cache.KVShape | None = None

    @property
    @abstractmethod
    def cached_tokens(self) -> int:
        """Positions of the text the cache holds."""

    @abstractmethod
    def next_pass(self, text_ids: list[int], phase: str) -> ForwardPass:
        """Feed what the cache lacks of `text_ids` (all of it at the prefill) and return the next-token pass."""

    @abstractmethod
    def crop_to(self, length: int) -> None:
        """Keep the cache's first `length` positions."""

    @abstractmethod
    def cache_layer_bytes(self) -> list[int]:
        """Bytes of each layer's key and value tensors, read from the tensors."""


class TransformersForward(Forward):
    """transformers' forward on a local model, over a `DynamicCache` of this run's own (the model is only called)."""

    def __init__(self, model, tokenizer):
        self.model = model
        self.cache = kv_cache.new_cache(model.config)
        self.context = context_limit(model.config)
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.vocab_size = vocabulary_rows(model)
        self.kv_shape = kv_cache.KVShape.from_config(model.config, next(model.parameters()).dtype)
        self.records_routing = has_experts(model)

    @property
    def cached_tokens(self) -> int:
        return kv_cache.cache_length(self.cache)

    def _run(self, ids: list[int], keep: int, prefill: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run `ids` after the cache (updated in place): the last `keep` positions' logits [keep, vocab] float32,
        and the routers' logits [layers, len(ids), experts] when this forward records them."""
        extra = {"output_router_logits": True} if self.records_routing else {}
        out = self.model(
            input_ids=torch.tensor([ids], dtype=torch.long),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=keep,
            **extra,
        )
        router_logits = None
        if self.records_routing and out.router_logits:
            layers = [r.float() for r in out.router_logits]  # each [tokens_in_forward, experts]
            router_logits = torch.stack(layers).view(len(layers), len(ids), -1)
        return out.logits[0].float(), router_logits

    @torch.inference_mode()
    def logits(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        """Run `ids` after the cache; the last `keep` positions' logits, [keep, vocab] float32."""
        return self._run(ids, keep, prefill=False)[0]

    @torch.inference_mode()
    def logits_and_features(self, ids: list[int], keep: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """`logits`, and the last decoder layer's output (before the final norm) at every position of `ids`,
        [len(ids), hidden], from the same pass: what a feature draft reads (`speculative.feature_draft`)."""
        out = self.model(
            input_ids=torch.tensor([ids], dtype=torch.long),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=keep,
            output_hidden_states=True,
        )
        return out.logits[0].float(), out.hidden_states[-1][0]

    @torch.inference_mode()
    def next_pass(self, text_ids: list[int], phase: str) -> ForwardPass:
        ids = text_ids[self.cached_tokens :]
        with measuring.Stopwatch() as watch:
            logits, router_logits = self._run(ids, 1, prefill=phase == PREFILL)
            logits = logits[0].clone()
        forward_ms = watch.ms
        return ForwardPass(
            logits=logits,
            forward_ms=forward_ms,
            phase=phase,
            tokens_in_forward=len(ids),
            cache_tokens=self.cached_tokens,
            cache_bytes=kv_cache.measured_bytes(self.cache),
            router_logits=router_logits,
        )

    def crop_to(self, length: int) -> None:
        extra = self.cached_tokens - length
        if extra > 0:
            self.cache.crop(-extra)  # transformers' DynamicCache.crop takes a negative count of tokens to drop

    def cache_layer_bytes(self) -> list[int]:
        return kv_cache.measured_bytes_per_layer(self.cache)

    @torch.inference_mode()
    def look(self, ids: list[int], parts: dict[str, list[torch.nn.Module]]) -> tuple[object, dict[str, float]]:
        """Run `ids` after the cache as transformers' forward runs them, with every layer's hidden states (and the
        routers' logits of an MoE model), and the ms spent inside each named part's modules: a forward pre-hook and
        hook per module read `measuring.now`, and are removed again after the pass (what a lesson about the parts
        of a pass asks for; it never calls the model itself)."""
        ms: dict[str, float] = dict.fromkeys(parts, 0.0)
        started: dict[int, float] = {}
        handles = []

        def start(module, *_):
            started[id(module)] = measuring.now()

        for name, modules in parts.items():
            for module in modules:

                def stop(module, *_, name=name):
                    ms[name] += measuring.ms_since(started[id(module)])

                handles += [module.register_forward_pre_hook(start), module.register_forward_hook(stop)]
        try:
            out = self.model(
                input_ids=torch.tensor([ids], dtype=torch.long),
                cache=self.cache,
                use_cache=True,
                logits_to_keep=1,
                output_hidden_states=True,
                **({"output_router_logits": True} if self.records_routing else {}),
            )
        finally:
            for handle in handles:
                handle.remove()
        return out, ms

    def layer_inputs(self, ids: list[int]) -> torch.Tensor:
        """Run `ids` after the cache; the residual stream entering each decoder layer at every position of `ids`, then
        transformers' final hidden state: [layers + 1, len(ids), hidden]."""
        out, _ = self.look(ids, {})
        return torch.stack(out.hidden_states)[:, 0]

    @torch.inference_mode()
    def batch_logits(self, rows: list[list[int]], keep: int = 1) -> torch.Tensor:
        """Run equal-length rows of ids as one batch after the cache (which then holds one sequence per row): the
        last `keep` positions' logits of each row, [rows, keep, vocab] float32 (keep 0: every position)."""
        ids = torch.tensor(rows, dtype=torch.long)
        return self.model(input_ids=ids, cache=self.cache, use_cache=True, logits_to_keep=keep).logits.float()


class ShortlistForward(TransformersForward):
    """`TransformersForward` whose next-token logits score only the token ids of `rows` (a speculative draft proposing
    from its most frequent tokens, as FR-Spec does): every other token's logit is -inf, so every sampling stage gives
    it probability 0. The model's body runs as usual; the output layer multiplies only the shortlisted rows, which is
    most of a small draft's work saved. Plain torch: the same numbers as the full logits' columns to float rounding."""

    def __init__(self, model, tokenizer, rows):
        super().__init__(model, tokenizer)
        self.rows = torch.tensor(sorted(set(int(r) for r in rows)), dtype=torch.long)
        if not len(self.rows) or self.rows[0] < 0 or self.rows[-1] >= self.vocab_size:
            raise ValueError(f"A shortlist holds token ids from 0 to {self.vocab_size - 1}")
        head = model.get_output_embeddings()
        self._short_weight = head.weight.detach()[self.rows]  # [rows, hidden]: a copy; the shared model is not changed
        self._short_bias = None if head.bias is None else head.bias.detach()[self.rows]

    def _run(self, ids: list[int], keep: int, prefill: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        body = self.model.get_decoder()
        out = body(input_ids=torch.tensor([ids], dtype=torch.long), cache=self.cache, use_cache=True)
        hidden = out.last_hidden_state[0, -keep:]  # [keep, hidden]
        short = torch.nn.functional.linear(hidden, self._short_weight, self._short_bias).float()
        full = torch.full((short.shape[0], self.vocab_size), -torch.inf)
        full[:, self.rows] = short
        return full, None
