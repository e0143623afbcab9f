"""What a speculative run says: its counts and costs over all its rounds, and what Leviathan et al.'s formula predicts
from α (the acceptance rate), γ (tokens drafted a round) and the measured costs of a round's passes."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from inference.lessons.speculative.drafters import RUNS_A_MODEL


@dataclass(frozen=True)
class RunSummary:
    rounds: int
    new_tokens: int
    drafted: int
    checked: int
    accepted: int
    draft_ms: float
    verify_ms: float
    total_ms: float
    draft_pass_ms: float | None  # median one-token draft pass (None: no draft model)
    verify_pass_ms: float  # median verify pass after the first round (whose pass also reads the prompt)
    verify_read_prompt: bool = False  # only round 0 ran: `verify_pass_ms` is its pass, the prompt's tokens included

    @property
    def acceptance_rate(self) -> float | None:
        """α: accepted / checked. Drafts after a rejection are never checked, so this (the maximum-likelihood estimate
        of a per-token acceptance chance) is what the theory's α is."""
        return self.accepted / self.checked if self.checked else None

    @property
    def tokens_per_target_pass(self) -> float:
        return self.new_tokens / self.rounds if self.rounds else 0.0

    @property
    def ms_per_token(self) -> float:
        return self.total_ms / self.new_tokens if self.new_tokens else float("nan")


def draft_passes(rounds: list) -> list[float]:
    """The draft model's one-token passes, in ms: round 0's first pass reads the whole prompt and is left out; every
    later pass feeds one token (two after a fully accepted round). Empty for prompt lookup."""
    return [ms for r in rounds if r.drafter in RUNS_A_MODEL for i, ms in enumerate(r.draft_ms) if r.index > 0 or i > 0]


def summarise(rounds: list) -> RunSummary:
    """The summary of a run's `RoundRecord`s."""
    draft_passes_ms = draft_passes(rounds)
    verify = [r.verify_ms for r in rounds[1:]] or [r.verify_ms for r in rounds] or [float("nan")]
    return RunSummary(
        rounds=len(rounds),
        new_tokens=sum(len(r.new_tokens) for r in rounds),
        drafted=sum(r.drafted for r in rounds),
        checked=sum(r.checked for r in rounds),
        accepted=sum(r.accepted for r in rounds),
        draft_ms=sum(sum(r.draft_ms) for r in rounds),
        verify_ms=sum(r.verify_ms for r in rounds),
        total_ms=sum(r.round_ms for r in rounds),
        draft_pass_ms=statistics.median(draft_passes_ms) if draft_passes_ms else None,
        verify_pass_ms=statistics.median(verify),
        verify_read_prompt=len(rounds) == 1,
    )


# -- theory ------------------------------------------------------------------------------------------------------------


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """Expected tokens one round (one target pass) yields when each draft is accepted with chance α independently:
    1 + α + ... + α^γ = (1 - α^(γ+1)) / (1 - α)."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"`alpha` has to be from 0 to 1, but is {alpha}")
    if alpha == 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """Leviathan et al.'s speed-up over plain decoding: tokens per round divided by the round's cost in one-token
    target passes, γ draft passes at c each plus the verify pass (1 in the paper, which assumes scoring γ + 1
    positions costs one pass; pass the measured ratio instead)."""
    return expected_tokens_per_pass(alpha, gamma) / (gamma * cost_ratio + verify_cost)


def break_even_alpha(gamma: int, cost_ratio: float, verify_cost: float = 1.0) -> float | None:
    """The smallest α at which speculation stops losing (predicted speed-up 1), or None if even α = 1 loses."""
    if predicted_speedup(1.0, gamma, cost_ratio, verify_cost) < 1:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if predicted_speedup(mid, gamma, cost_ratio, verify_cost) < 1 else (low, mid)
    return high


def round_to_show(rounds: list) -> int | None:
    """The round a page opens up: the last that drafted anything. A run's final round often drafts nothing (one token
    left to make), and "Drafted at most 0 token(s)" teaches nothing; None when there is no round."""
    if not rounds:
        return None
    drafted = [i for i, r in enumerate(rounds) if r.drafted > 0]
    return drafted[-1] if drafted else len(rounds) - 1
