"""A constrained run: the step engine's `Trace` with the format's allowed set as the pipeline's "mask" stage (timed:
`mask_us`), the matcher advancing by each chosen token (`advance_us`). Z_t (`allowed_mass`) is the model's own raw
probability on the allowed tokens: near 1 the format asks what it wanted anyway, near 0 it forces it elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from inference.core.measuring import Stopwatch
from inference.core.run import STOP_MAX_NEW_TOKENS, StepRecord, new_trace
from inference.lessons.constrained.formats import Format, FormatError
from inference.sampling.pipeline import MASK, SamplingSettings, StepContext, stage_logits

WANTED = 5  # removed tokens shown per step: the ones the model wanted most
NO_TOKEN = "No token of this tokenizer can continue the format here, so nothing can be drawn (the text so far is kept)."
TOO_FEW = (
    "The format needs more tokens than the {n} allowed: the text so far is kept, but it does not fit the format yet."
)
CONTEXT_ENDED = "The model's context ended before the format was complete: the text so far is kept."


@dataclass(frozen=True)
class MaskedStep:
    index: int
    token_id: int
    allowed: int  # tokens the format allowed
    allowed_mass: float  # Z_t: the model's raw probability on them, before any stage
    mask_us: float  # computing the allowed set (the library's per-token cost)
    advance_us: float  # the matcher consuming the chosen token
    removed_wanted: tuple[tuple[int, float], ...]  # (id, raw prob) of the most likely tokens the format removed


class ConstrainedRun:
    """A trace whose every step is masked by `fmt` (None: a plain run, the pipeline untouched)."""

    def __init__(self, model, tokenizer, prompt_ids: list[int], fmt: Format | None, max_new_tokens: int, seed: int = 0):
        self.trace = new_trace(model, tokenizer, prompt_ids, max_new_tokens, seed=seed)
        self.format, self.tokenizer = fmt, tokenizer
        self.matcher = None if fmt is None else fmt.matcher(tokenizer, self.trace.vocab_size)
        self.steps: list[MaskedStep] = []
        self.halted: str | None = None  # a page's Play stops here: the sentence of the step that could not be taken

    @property
    def records(self) -> list[StepRecord]:
        return self.trace.records

    @property
    def finished(self) -> bool:
        return self.trace.finished or self.halted is not None

    @property
    def text_ids(self) -> list[int]:
        ids = self.trace.generated_ids
        return ids[:-1] if ids and ids[-1] in self.trace.eos_ids else ids

    @property
    def text(self) -> str:
        return self.tokenizer.decode(self.text_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    @property
    def complete(self) -> bool:
        return self.matcher is None or self.matcher.is_accepting()

    def unfinished_sentence(self) -> str | None:
        """Why the text does not fit the format yet, once the run has stopped; None when it does."""
        if not self.finished or self.complete:
            return None
        if self.trace.stop_reason == STOP_MAX_NEW_TOKENS:
            return TOO_FEW.format(n=self.trace.max_new_tokens)
        return CONTEXT_ENDED

    def logprob(self) -> float:
        """log p of the generated tokens (end-of-text included) under the model's raw distribution (T = 1)."""
        return sum(float(r.logits.double().log_softmax(-1)[r.token_id]) for r in self.records)

    def step(self, settings: SamplingSettings) -> StepRecord | None:
        """One token; None once stopped. A step the format cannot take raises FormatError, the run unchanged."""
        if self.trace.finished:
            return None
        if self.matcher is None:
            return self.trace.step(settings)
        with Stopwatch() as mask_watch:
            packed = self.matcher.compute_bitmask()
        if self.matcher.is_error():  # no token can continue: the library stops with an error
            raise FormatError(NO_TOKEN)
        masked = replace(settings, allowed_tokens=packed)
        logits = self.trace.peek()
        allowed = masked.allowed_mask(len(logits))
        if masked.pipeline[0] != MASK:  # after other stages, they may have removed every allowed token
            n = self.trace.next_index
            context = self.trace.step_context(n, masked) if masked.needs_context else StepContext()
            try:
                stage_logits(logits, masked, self.trace.seen_now(), context)
            except ValueError as error:
                raise FormatError(f"{error} (step {n}): move the mask earlier in the order.") from None
        raw = logits.double().log_softmax(-1)
        removed = raw.masked_fill(allowed, float("-inf")).topk(WANTED)
        record = self.trace.step(masked)
        with Stopwatch() as advance_watch:
            accepted = self.matcher.consume_token(record.token_id)
        if not accepted:  # cannot happen when the mask works: say so loudly rather than go on
            raise RuntimeError(f"The matcher refused token {record.token_id}: {self.matcher.get_error()}")
        wanted = tuple((int(i), float(v.exp())) for v, i in zip(removed.values, removed.indices) if torch.isfinite(v))
        mass = float(raw[allowed].exp().sum())
        self.steps.append(
            MaskedStep(record.index, record.token_id, int(allowed.sum()), mass, mask_watch.ms * 1000, advance_watch.ms * 1000, wanted)
        )  # fmt: skip
        return record

    def run(self, settings: SamplingSettings, max_steps: int | None = None) -> None:
        taken = 0
        while not self.trace.finished and (max_steps is None or taken < max_steps):
            self.step(settings)
            taken += 1

    def step_or_halt(self, settings: SamplingSettings) -> StepRecord | None:
        """`step`, keeping a FormatError's sentence in `halted` instead of raising (Play then stops)."""
        self.halted = None
        try:
            return self.step(settings)
        except FormatError as error:
            self.halted = str(error)
            return None

    def back(self) -> None:
        self.halted = None
        if self.records:
            self.trace.back()
            if self.matcher is not None:
                self.matcher.rollback(1)
                self.steps.pop()


def unconstrained_twin(run: ConstrainedRun, settings: SamplingSettings) -> ConstrainedRun:
    """The model's own continuation: same prompt, settings and seed, mask off, as many tokens."""
    trace = run.trace
    plain = ConstrainedRun(trace.model, run.tokenizer, trace.prompt_ids, None, max(1, len(trace.records)), trace.seed)
    plain.run(settings)
    return plain
