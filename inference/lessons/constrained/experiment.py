"""The page's and the command line's computation: one constrained run to its end, the model's own
unconstrained continuation beside it, and what it all cost.

A run that cannot go on (no token can continue the format, or the stages before the mask left
none) keeps the steps it took and carries one sentence saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.lessons.constrained.formats import Format, FormatError
from inference.lessons.constrained.run import ConstrainedRun
from inference.sampling.pipeline import SamplingSettings


@dataclass
class Outcome:
    run: ConstrainedRun  # the constrained run (steps so far, if it was stopped by an error)
    plain: ConstrainedRun  # the same prompt, settings and seed with the mask off, as many tokens
    error: str | None = None  # one sentence when the run could not go on

    @property
    def message(self) -> str | None:
        return self.error or self.run.unfinished_sentence()

    @property
    def logprob(self) -> float:
        return self.run.logprob()

    @property
    def logprob_unconstrained(self) -> float:
        return self.plain.logprob()

    @property
    def valid(self) -> bool:
        """The text fits the format by the independent oracle (jsonschema, re.fullmatch, the list)."""
        return self.run.format is not None and self.run.format.matches(self.run.text)

    def to_json(self) -> dict:
        return {
            "text": self.run.text,
            "steps": [
                {
                    "token_id": s.token_id,
                    "allowed": s.allowed,
                    "allowed_mass": s.allowed_mass,
                    "mask_us": round(s.mask_us, 1),
                }
                for s in self.run.steps
            ],
            "logprob": self.logprob,
            "logprob_unconstrained": self.logprob_unconstrained,
            "unconstrained_text": self.plain.text,
            "valid": self.valid,
            "stop_reason": self.run.trace.stop_reason,
            "error": self.message,
        }


def run_to_end(run: ConstrainedRun, settings: SamplingSettings) -> str | None:
    """Step until the run stops; the one-sentence reason if a step could not be taken."""
    try:
        run.run(settings)
    except FormatError as error:
        return str(error)
    return None


def unconstrained_twin(run: ConstrainedRun, settings: SamplingSettings) -> ConstrainedRun:
    """The model's own continuation: same prompt, settings and seed, mask off, as many tokens."""
    trace = run.trace
    plain = ConstrainedRun(
        trace.model, run.tokenizer, trace.prompt_ids, None, max(1, len(trace.records)), seed=trace.seed
    )
    plain.run(settings)
    return plain


def constrained_outcome(
    model, tokenizer, prompt_ids: list[int], fmt: Format, settings: SamplingSettings, max_new_tokens: int, seed: int = 0
) -> Outcome:
    """Compile (cached), run to the end, then the unconstrained twin. FormatError from compiling
    propagates (nothing ran); one from a step is kept with the run so far."""
    run = ConstrainedRun(model, tokenizer, prompt_ids, fmt, max_new_tokens, seed=seed)
    error = run_to_end(run, settings)
    return Outcome(run, unconstrained_twin(run, settings), error)
