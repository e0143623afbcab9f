"""The step engine: one token a step on token ids, every step recorded in a `Trace` (the shared model is only
called). 1. prefill fills the KV cache from the prompt; 2. decode feeds the token chosen before; 3. the pipeline
draws with one recorded uniform u. The chosen token is fed at the start of the next step, so a run's last step pays
for no pass nobody reads, and a rewound step reuses its stored logits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pandas as pd
import torch

from inference.core import measuring
from inference.core.forward import (
    DECODE,
    PREFILL,
    Forward,
    ForwardPass,
    ServerStep,
    TransformersForward,
    pass_fields,
)
from inference.core.forward import context_limit as context_limit  # the run's names, defined with the pass
from inference.core.forward import eos_token_ids as eos_token_ids
from inference.core.forward import vocabulary_rows as vocabulary_rows
from inference.core.remote import RemoteForward, is_remote
from inference.core.tokens import token_text
from inference.sampling.pipeline import (
    MIN_SORTED,
    RankedStages,
    SamplingSettings,
    StepContext,
    draw,
    ranked_stages,
    seen_mask,
)
from inference.sampling.stages import dry_breaker_ids, mirostat_start, xtc_uniforms

STOP_EOS = "eos"
STOP_MAX_NEW_TOKENS = "max_new_tokens"
STOP_CONTEXT = "context_limit"
SEED_MAX = 2**32 - 1
GREEDY = SamplingSettings(temperature=0)


def check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"`seed` has to be an integer from 0 to {SEED_MAX}, but is {seed!r}")


def run_uniforms(seed: int, steps: int) -> torch.Tensor:
    """u_0, u_1, ... of a seed from a private generator: step i always gets the i-th, rewound or forked."""
    check_seed(seed)
    return torch.rand(steps, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def check_run(prompt_ids: list[int], context: int, max_new_tokens: int, error: type[ValueError] = ValueError) -> None:
    """Refuse a run that cannot start: an empty prompt, one that fills the context, or nothing to generate."""
    if not prompt_ids:
        raise error("The prompt has no tokens")
    if len(prompt_ids) >= context:
        raise error(
            f"The prompt has {len(prompt_ids)} tokens; this model's context holds {context}, "
            "and at least one more is needed for the reply"
        )
    if max_new_tokens < 1:
        raise error(f"`max_new_tokens` has to be at least 1, but is {max_new_tokens}")


@dataclass
class StepRecord:
    index: int
    phase: str  # "prefill" (the forward pass read the whole prompt) or "decode" (one token)
    logits: torch.Tensor  # [vocab] float32: the raw next-token logits of this step
    settings: SamplingSettings
    seed: int
    token_id: int
    token_text: str
    rank: int  # 0-based rank of the chosen token in display order
    prob: float  # its probability in the final (sampled-from) distribution
    u: float
    alternatives: list[tuple[int, float, float]]  # top 5 (token id, raw prob, final prob)
    entropy_bits: float  # of the final distribution
    kept: int  # tokens the settings left in it
    forward_ms: float
    sample_ms: float
    tokens_in_forward: int
    cache_tokens: int  # KV-cache length after this step's forward pass
    cache_bytes: int  # measured from the cache tensors
    reused_forward: bool = False  # logits kept from before a rewind: no forward pass ran
    xtc_u: float | None = None  # XTC's own uniform for this step (its second seeded stream), when XTC was on
    mirostat_mu: float | None = None  # mirostat's running target this step cut at, when mirostat was on
    mirostat_mu_next: float | None = None  # ... and after this step's draw
    # Mixture-of-Experts models: every router's logits for the tokens this step's forward pass
    # fed, [layers, tokens_in_forward, experts] float32 (see inference.core.routing); None otherwise.
    router_logits: torch.Tensor | None = None
    server_step: ServerStep | None = None  # what the serving engine said, when one ran the forward pass


class Generation:
    """What a `Trace` and a `speculative.SpeculativeRun` share: the text so far, when it stops, stepping to there."""

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.generated_ids

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None

    def _reason_to_stop(self) -> str | None:
        generated = self.generated_ids
        if self.stop_at_eos and generated[-1] in self.eos_ids:
            return STOP_EOS
        if len(generated) >= self.max_new_tokens:
            return STOP_MAX_NEW_TOKENS
        if len(self.prompt_ids) + len(generated) >= self.context:
            return STOP_CONTEXT
        return None

    def _steps(self, settings: SamplingSettings, most: int | None) -> Iterator:
        taken = 0
        while not self.finished and (most is None or taken < most):
            record = self.step(settings)
            if record is None:
                break
            taken += 1
            yield record


@dataclass
class Trace(Generation):
    """One run: a prompt, its step records and its `Forward` (with the KV cache). With n records and no pass waiting
    the cache holds the prompt and n - 1 chosen tokens; a waiting pass (`peek`, `rewind`) has fed the last."""

    model: object
    tokenizer: object
    prompt_ids: list[int]
    max_new_tokens: int
    seed: int = 0
    stop_at_eos: bool = True  # benchmarks switch it off to time an exact number of steps
    records: list[StepRecord] = field(default_factory=list)
    stop_reason: str | None = None
    forward: Forward | None = field(default=None, repr=False)  # None: `forward_for(model, tokenizer)`

    def __post_init__(self):
        if self.forward is None:
            self.forward = forward_for(self.model, self.tokenizer)
        forward = self.forward
        check_run(self.prompt_ids, forward.context, self.max_new_tokens)
        self.context, self.eos_ids, self.vocab_size = forward.context, forward.eos_ids, forward.vocab_size
        self._uniforms = {self.seed: run_uniforms(self.seed, self.context)}  # never more steps than context
        self._pending: ForwardPass | None = None  # computed, not yet sampled from
        self._ranked_next: tuple | None = None  # (pass, settings, context, RankedStages) from `ranked_next`
        self._seen = seen_mask(self.prompt_ids, self.vocab_size)
        self._xtc_uniforms: dict[int, torch.Tensor] = {}  # seed -> XTC's uniform per step
        self._breaker_ids: dict[tuple[str, ...], frozenset[int]] = {}  # DRY breakers -> token ids

    @property
    def generated_ids(self) -> list[int]:
        return [r.token_id for r in self.records]

    @property
    def kv_shape(self):
        return self.forward.kv_shape  # None when the cache lives in a serving engine

    @property
    def server_steps(self) -> list[ServerStep | None]:
        return [r.server_step for r in self.records]

    def pending_server_step(self) -> ServerStep | None:
        """What the engine said about the distribution the next step will draw from (after `peek`)."""
        return self._pending.server_step if self._pending is not None else None

    def peek(self) -> torch.Tensor | None:
        """The raw logits the next step samples from (its pass run now if needed); None once stopped."""
        if self.finished:
            return None
        if self._pending is None:
            self._pending = self.forward.next_pass(self.all_ids, DECODE if self.records else PREFILL)
        return self._pending.logits

    def ranked_next(self, settings: SamplingSettings, context: StepContext | None = None) -> RankedStages:
        """`ranked_stages` of the next step's pass, kept for that step's draw: the vocabulary is ranked once."""
        logits = self.peek()
        if logits is None:
            raise ValueError("The run has stopped: there is no next step to rank")
        ranked = ranked_stages(logits, settings, self._seen, min_sorted=MIN_SORTED, context=context)
        self._ranked_next = (self._pending, settings, context, ranked)
        return ranked

    @property
    def next_index(self) -> int:
        return len(self.records)

    def uniform(self, step: int, seed: int | None = None) -> float:
        seed = self.seed if seed is None else seed
        if seed not in self._uniforms:
            self._uniforms[seed] = run_uniforms(seed, self.context)
        return float(self._uniforms[seed][step])

    def next_uniform(self) -> float:
        return self.uniform(len(self.records))

    def step_context(self, step: int, settings: SamplingSettings) -> StepContext:
        """What step `step`'s DRY, XTC and mirostat read: the ids before it, the breakers, XTC's own uniform and mu."""
        if self.seed not in self._xtc_uniforms:
            self._xtc_uniforms[self.seed] = xtc_uniforms(self.seed, self.context)
        before = self.records[step - 1] if 0 < step <= len(self.records) else None
        mu = before.mirostat_mu_next if before is not None and settings.mirostat else None
        if mu is None and settings.mirostat:
            mu = mirostat_start(settings.mirostat_tau)
        breakers = settings.dry_sequence_breakers
        if settings.dry_multiplier > 0 and breakers not in self._breaker_ids:
            self._breaker_ids[breakers] = dry_breaker_ids(self.tokenizer, breakers)
        return StepContext(
            history=tuple(self.all_ids[: len(self.prompt_ids) + step]),
            breaker_ids=self._breaker_ids.get(breakers, frozenset()),
            xtc_u=float(self._xtc_uniforms[self.seed][step]),
            mirostat_mu=mu,
        )

    def step(self, settings: SamplingSettings, seed: int | None = None) -> StepRecord | None:
        """Choose one more token; None once stopped. A failed pass raises before anything changes."""
        if self.finished:
            return None
        if seed is not None:
            check_seed(seed)
        self.peek()
        if seed is not None:
            self.seed = seed
        fwd, self._pending = self._pending, None
        n = len(self.records)

        start = measuring.now()
        u = self.uniform(n)
        context = self.step_context(n, settings) if settings.needs_context else None
        kept, self._ranked_next = self._ranked_next, None
        ranked = kept[3] if kept is not None and kept[0] is fwd and kept[1:3] == (settings, context) else None
        choice = draw(fwd.logits, settings, self._seen, u, context, ranked=ranked)
        sample_ms = measuring.ms_since(start)

        record = StepRecord(
            **pass_fields(fwd),
            index=n,
            settings=settings,
            seed=self.seed,
            token_id=choice.token_id,
            token_text=token_text(self.tokenizer, choice.token_id),
            rank=choice.rank,
            prob=choice.prob,
            u=u,
            alternatives=choice.alternatives,
            entropy_bits=choice.entropy_bits,
            kept=choice.kept,
            sample_ms=sample_ms,
            reused_forward=fwd.reused,
            xtc_u=context.xtc_u if settings.xtc_probability > 0 else None,
            mirostat_mu=context.mirostat_mu if settings.mirostat else None,
            mirostat_mu_next=choice.mirostat_mu_next,
        )
        self.records.append(record)
        self._seen[choice.token_id] = True
        self.stop_reason = self._reason_to_stop()
        return record

    def run(self, settings: SamplingSettings, max_steps: int | None = None) -> Iterator[StepRecord]:
        return self._steps(settings, max_steps)

    def rewind(self, k: int) -> None:
        """Keep the first k steps; the next re-chooses token k from its stored logits (nothing recomputed)."""
        n = len(self.records)
        if not 0 <= k < n:
            raise ValueError(f"Can rewind to a step from 0 to {n - 1}, not {k}")
        # Record k's logits came from a cache of prompt + k tokens; now it holds prompt + n - 1, or prompt + n
        # when a forward pass is waiting (peeked, or kept by an earlier rewind).
        self.forward.crop_to(len(self.prompt_ids) + k)
        self._pending = ForwardPass.kept(self.records[k])
        self.records = self.records[:k]
        self._seen = seen_mask(self.all_ids, self.vocab_size)
        self.stop_reason = None

    def back(self) -> None:
        if self.records:
            self.rewind(len(self.records) - 1)

    def seen_now(self) -> torch.Tensor:
        """[vocab] tokens the next step's repetition penalty sees."""
        return self._seen.clone()

    def cache_layer_bytes(self) -> list[int]:
        return self.forward.cache_layer_bytes()

    def logits_matrix(self) -> torch.Tensor:
        return torch.stack([r.logits for r in self.records]) if self.records else torch.empty(0, self.vocab_size)

    def seen_masks(self) -> torch.Tensor:
        """[steps, vocab]: which tokens each step's repetition penalty saw."""
        masks = torch.zeros(len(self.records), self.vocab_size, dtype=torch.bool)
        running = seen_mask(self.prompt_ids, self.vocab_size)
        for i, record in enumerate(self.records):
            masks[i] = running
            running[record.token_id] = True
        return masks

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([record_row(r) for r in self.records])


ROW_SETTINGS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
ROW_PASS = ("forward_ms", "sample_ms", "tokens_in_forward", "cache_tokens", "cache_bytes", "reused_forward")


def record_row(r: StepRecord) -> dict:
    """One step's row of `Trace.to_frame` (the CSV); its raw probability takes a softmax, so pages keep rows."""
    row = {"step": r.index, "phase": r.phase, "token_id": r.token_id, "token": r.token_text, "rank": r.rank + 1}
    row |= {"prob": r.prob, "entropy_bits": r.entropy_bits, "tokens_kept": r.kept, "u": r.u}
    row |= {name: getattr(r.settings, name) for name in ROW_SETTINGS}
    row |= {"seed": r.seed, "raw_prob": float(r.logits.softmax(-1)[r.token_id])}
    row |= {name: getattr(r, name) for name in ROW_PASS}
    return row | (r.server_step.frame_columns() if r.server_step is not None else {})


def forward_for(model, tokenizer) -> Forward:
    """The forward a run uses, chosen once here: a serving engine's requests, else transformers' own forward."""
    if is_remote(model):
        return RemoteForward(model)
    return TransformersForward(model, tokenizer)


def new_trace(
    model, tokenizer, prompt_ids: list[int], max_new_tokens: int, seed: int = 0, stop_at_eos: bool = True
) -> Trace:
    """A run on a local model, or on a model a serving engine runs (`inference.core.remote`)."""
    return Trace(model, tokenizer, list(prompt_ids), max_new_tokens, seed, stop_at_eos)


def warm_up(model, tokenizer) -> None:
    """A short untimed sampled run, so the first pass a page measures pays no one-time setup (threads, kernels)."""
    trace = new_trace(model, tokenizer, [0, 1, 2, 3], 3, stop_at_eos=False)
    for _ in trace.run(SamplingSettings(temperature=0.8, top_p=0.95)):
        pass


def run_greedy(model, tokenizer, prompt_ids: list[int], new_tokens: int, stop_at_eos: bool = True) -> Trace:
    """A greedy run of the step engine to its end (EOS unless `stop_at_eos` is off, or `new_tokens`)."""
    trace = new_trace(model, tokenizer, prompt_ids, new_tokens, stop_at_eos=stop_at_eos)
    for _ in trace.run(GREEDY):
        pass
    return trace
