"""What a chart needs about one step (or a trace) under one set of settings, from stored raw logits (a slider never
runs the model). Probabilities are over the full vocabulary; a table shows the top N and the rest as "other"."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from inference.core.tokens import readable_tokens
from inference.sampling.pipeline import (
    MIN_SORTED,
    RankedStages,
    SamplingSettings,
    display_order,
    entropy_bits,
    inverse_cdf_index,
    probs_in_order,
    ranked_stages,
    ranking_logits,
    stage_logits,
)
from inference.sampling.stages import StepContext


@dataclass(frozen=True)
class StepView:
    settings: SamplingSettings
    order: torch.Tensor  # [V] token ids, most likely first (see sorted_prefix)
    probs: dict[str, torch.Tensor]  # "raw", then each stage as it ran -> [sorted_prefix] float64, display order
    kept: dict[str, int]  # stage -> tokens with probability > 0 after it
    entropy_raw_bits: float
    entropy_final_bits: float
    nucleus_size: int  # tokens top-p kept
    nucleus_mass: float  # probability they held in the distribution top-p saw
    chosen_rank: int  # 0-based, in display order
    chosen_id: int
    u: float | None
    sorted_prefix: int  # order[:sorted_prefix] is exact and holds every kept token; the rest in id order

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(self.probs)

    @property
    def final_stage(self) -> str:
        return self.stages[-1]

    @property
    def final(self) -> torch.Tensor:
        return self.probs[self.final_stage]

    @property
    def cumulative_final(self) -> torch.Tensor:
        return self.final.double().cumsum(0)

    @property
    def cumulative_before_top_p(self) -> torch.Tensor:
        return self.probs[self.stages[self.stages.index("top_p") - 1]].double().cumsum(0)

    def table(self, tokenizer, top_n: int = 20) -> pd.DataFrame:
        """Top N rows in display order and an "other" row: one column per stage, and "final"."""
        return pd.DataFrame(self.columns(tokenizer, top_n))

    def columns(self, tokenizer, top_n: int = 20) -> dict[str, np.ndarray | list]:
        """`table`'s columns without the DataFrame: Generate reads them every Step, and a frame costs more."""
        n = min(top_n, len(self.order))
        if n > self.sorted_prefix:
            raise ValueError(
                f"`top_n` can be at most {self.sorted_prefix} (the sorted part of this view), but is {top_n}"
            )
        ids = self.order[:n].tolist()
        top = {stage: self.probs[stage][:n].double().numpy() for stage in self.stages}
        zero = np.array([top[stage] == 0 for stage in self.stages[1:]]).reshape(len(self.stages) - 1, n)
        first = zero.argmax(axis=0)  # the first stage (after the logits) that removed each token, if any
        removed = [self.stages[1 + first[i]] if zero[:, i].any() else "" for i in range(n)]
        columns = {
            "rank": np.array([*range(1, n + 1), None], dtype=object),  # whole numbers, none for "other"
            "token_id": np.array([*ids, None], dtype=object),
            "token": [*readable_tokens(tokenizer, ids), f"other ({len(self.order) - n:,} tokens)"],
        }
        for stage in self.stages:
            columns[stage] = np.append(top[stage], max(0.0, 1.0 - float(top[stage].sum())))
        columns["final"] = columns[self.final_stage].copy()
        columns["cumulative_final"] = np.append(self.cumulative_final[:n].numpy(), 1.0)
        columns["cumulative_before_top_p"] = np.append(self.cumulative_before_top_p[:n].numpy(), 1.0)
        columns["removed_by"] = [*removed, ""]
        columns["chosen"] = [*(i == self.chosen_rank for i in range(n)), self.chosen_rank >= n]
        return columns


def step_view(
    logits: torch.Tensor,
    settings: SamplingSettings,
    seen: torch.Tensor,
    u: float | None = None,
    chosen_id: int | None = None,
    context: StepContext | None = None,
    ranked: RankedStages | None = None,
) -> StepView:
    """One step's view; chosen: `chosen_id` (a recorded step), else where `u` falls (the top token when u is None).
    `ranked`: `ranked_stages` of these arguments with `min_sorted=MIN_SORTED` (`Trace.ranked_next`)."""
    if ranked is None:
        ranked = ranked_stages(logits, settings, seen, min_sorted=MIN_SORTED, include_token=chosen_id, context=context)
    stages, order = ranked.logits, ranked.order
    shown = order[: ranked.sorted_prefix]  # every token with a final probability > 0 is in here
    # float64 softmax: the displayed shares add up to 1 and the draw matches `pipeline.draw`.
    probs, kept = {}, {}
    for name, stage in stages.items():
        if int(torch.isfinite(stage[shown]).sum()) == int(torch.isfinite(stage).sum()):  # every kept token is shown
            probs[name] = probs_in_order(stage, shown)
            kept[name] = int((probs[name] > 0).sum())
        else:  # the shares need the whole vocabulary's sum
            full = stage.double().softmax(-1)
            probs[name], kept[name] = full[shown], int((full > 0).sum())
    raw = logits.double().softmax(-1)
    names = list(stages)
    final = probs[names[-1]]
    if chosen_id is not None:
        chosen_rank = ranked.token_rank
    elif u is None and not settings.greedy:
        chosen_rank = 0  # nothing drawn yet: the top token
    else:  # greedy keeps one token with probability 1: any u lands on it
        chosen_rank = int(inverse_cdf_index(final, 0.0 if u is None else u))
    nucleus_mask = probs["top_p"] > 0
    before_top_p = probs[names[names.index("top_p") - 1]]
    return StepView(
        settings=settings,
        order=order,
        probs=probs,
        kept=kept,
        entropy_raw_bits=float(entropy_bits(raw)),
        entropy_final_bits=float(entropy_bits(final)),
        nucleus_size=int(nucleus_mask.sum()),
        nucleus_mass=float(before_top_p[nucleus_mask].sum()),
        chosen_rank=chosen_rank,
        chosen_id=int(order[chosen_rank]),
        u=u,
        sorted_prefix=ranked.sorted_prefix,
    )


def trace_summary(
    logits: torch.Tensor,
    seen: torch.Tensor,
    settings: SamplingSettings,
    us: torch.Tensor,
    recorded_ids: torch.Tensor,
    contexts: list[StepContext] | None = None,
) -> pd.DataFrame:
    """Every step of a trace (logits [S, V], seen [S, V], us [S], recorded_ids [S]) re-read under `settings` in one
    batch: the recorded token's probability and rank now, what the same u draws now, entropy, tokens kept."""
    stages = stage_logits(logits, settings, seen, contexts)
    final = stages[settings.pipeline[-1]].double().softmax(-1)
    raw = logits.double().softmax(-1)
    penalised = ranking_logits(logits, settings, seen, contexts)
    recorded = recorded_ids.long().unsqueeze(-1)
    recorded_logit = penalised.gather(-1, recorded)
    order = display_order(penalised)
    would_rank = inverse_cdf_index(final.gather(-1, order), us.double())
    return pd.DataFrame(
        {
            "step": range(len(us)),
            "recorded_token_id": recorded_ids.tolist(),
            "recorded_prob_now": final.gather(-1, recorded).squeeze(-1).double().numpy(),
            "recorded_raw_prob": raw.gather(-1, recorded).squeeze(-1).double().numpy(),
            "recorded_rank_now": ((penalised > recorded_logit).sum(-1) + 1).numpy(),
            "would_draw_id": order.gather(-1, would_rank.unsqueeze(-1)).squeeze(-1).numpy(),
            "entropy_raw_bits": entropy_bits(raw.double()).numpy(),
            "entropy_final_bits": entropy_bits(final.double()).numpy(),
            "tokens_kept": (final > 0).sum(-1).numpy(),
        }
    )


def sample_many(view: StepView, n: int, seed: int, top_n: int = 10) -> pd.DataFrame:
    """N seeded inverse-CDF draws from the view's final distribution, counted for the top N and "other"."""
    gen = torch.Generator().manual_seed(seed)
    us = torch.rand(n, generator=gen, dtype=torch.float64)
    ranks = inverse_cdf_index(view.final.double().expand(n, -1), us)
    counts = torch.bincount(ranks, minlength=len(view.order)).double()
    shown = min(top_n, len(view.order))
    observed = (counts[:shown] / n).tolist()
    computed = view.final[:shown].double().tolist()
    return pd.DataFrame(
        {
            "rank": list(range(1, shown + 1)) + [None],
            "token_id": view.order[:shown].tolist() + [None],
            "computed": computed + [max(0.0, 1 - sum(computed))],
            "observed": observed + [float(counts[shown:].sum() / n)],
            "count": counts[:shown].long().tolist() + [int(counts[shown:].sum())],
        }
    )
