"""The Speculative decoding page's sentences, every number passed in (from the run, its timing or the sweep)."""

from __future__ import annotations

import pandas as pd

from inference.lessons.speculative.run import RoundRecord
from inference.lessons.speculative.timing import Comparison

NEXT_ROUND = "press Step for the next round"
NO_ROUND_YET = "Press **Step** to run one round: the drafter guesses, the target checks every guess in one pass."
GREEDY_TEST = (
    "At temperature 0 p and q are certain (100% on each model's top token): the test keeps a "
    "draft token exactly while it is the target's top token, and no random number is needed."
)
CAPTIONS = {  # what each chart and table shows, and how its numbers were obtained
    "pq": "q and p of each drafted token under the same sampling settings, from the two models' "
    "real logits (greedy runs show T=1 probabilities). Outline: green accepted, red rejected, grey "
    "never checked.",
    "accept": "u is the uniform number drawn for each test (seeded generator); the bar is "
    "min(1, p/q), computed exactly. Drafts after the first failure are never tested.",
    "residual": "p, q and the residual normalise(max(0, p − q)) at the rejected position, for the "
    "tokens where any of them is largest; ▶ marks the token drawn from the residual. The residual "
    "gives back exactly the probability the draft took too much of: that is why the text keeps the "
    "target's distribution.",
    "theory": "Leviathan et al.'s formula (1 − α^(γ+1)) / ((1 − α)(γc + 1)), with c measured here; the dashed "
    "curve also charges the verify pass its measured cost. The star is this run, measured.",
    "sweep_tokens": "Solid: tokens per target pass counted in each run. Dashed: (1 − α^(γ+1)) / (1 − α), "
    "computed exactly from that run's α.",
    "rounds": "One row per round (one target pass each). Times are wall time on this machine.",
}


def bundled_draft_unusable(target_name: str, problem: str) -> str:
    return (
        f"The bundled draft cannot serve {target_name}: {problem} Type a hub draft that shares "
        f"{target_name}'s tokenizer, or use prompt lookup (running now)."
    )


def typed_draft_unusable(problem: str, load_failed: bool) -> str:
    if load_failed:
        return f"{problem} Using prompt lookup instead."
    return f"{problem} Using prompt lookup instead, which needs no second model."


def run_lead(target_name: str, draft_name: str | None, prompt_tokens: int, generated: int, rounds: int) -> str:
    """The status line's first part: who checks, who drafts, and what the run holds."""
    drafter = f"draft model {draft_name}" if draft_name else "prompt lookup"
    return (
        f"{target_name} checks, {drafter} drafts · {prompt_tokens} prompt tokens · "
        f"{generated} generated in {rounds} target passes"
    )


def round_sentence(record: RoundRecord, token: str) -> str:
    """What one round did; `token` is the round's own token, already escaped for the page."""
    verdict = {
        "residual": f"draft token {record.accepted + 1} failed its test, so the target drew its own token "
        f"'{token}' from the residual",
        "bonus": f"all {record.drafted} draft tokens passed, and the same target pass gave a bonus token '{token}'",
        "target": f"nothing was drafted, so this pass made one token '{token}', as plain decoding would",
    }[record.token_kind]
    return (
        f"**Round {record.index}:** {record.accepted} of {record.drafted} draft tokens accepted; {verdict}. "
        f"**{len(record.new_tokens)} token(s) from one target pass.**"
    )


def run_metrics(result: Comparison, gamma: int) -> list[tuple[str, str, str]]:
    """The run's six metrics against plain decoding, as (label, value, hover help)."""
    summary, alpha, c = result.summary, result.summary.acceptance_rate, result.cost_ratio
    predicted = result.predicted_speedup(measured_verify=True)
    return [
        (
            "α: acceptance rate",
            "–" if alpha is None else f"{alpha:.0%}",
            f"{summary.accepted} accepted of {summary.checked} draft tokens checked.",
        ),
        (
            "Tokens per target pass",
            f"{summary.tokens_per_target_pass:.2f}",
            f"{summary.new_tokens} tokens from {summary.rounds} passes of the target; plain decoding makes 1.",
        ),
        (
            "Measured speed-up",
            f"{result.measured_speedup:.2f}×",
            f"Plain decoding {result.plain.total_ms:.0f} ms vs speculative {summary.total_ms:.0f} ms for these tokens.",
        ),
        (
            "c: draft pass / target pass",
            "≈ 0 (a search)" if c is None else f"{c:.2f}",
            "Median one-token draft pass over the median one-token target pass, both measured.",
        ),
        (
            "Verify pass / target pass",
            f"{result.verify_cost:.2f}",
            f"Scoring γ + 1 = {gamma + 1} positions in one pass, against one position.",
        ),
        (
            "Predicted speed-up",
            "–" if predicted is None else f"{predicted:.2f}×",
            "(1 − α^(γ+1)) / (1 − α) tokens per round ÷ (γ·c + verify cost), from this run's α and costs.",
        ),
    ]


def when_it_loses(
    measured_speedup: float, gamma: int, cost: float, verify_cost: float, even: float | None, alpha: float | None
) -> str:
    """When speculation loses, with this run's numbers (`even`: the break-even α, None when none exists)."""
    losses = []
    if measured_speedup < 1:
        losses.append(f"**This run lost**: {measured_speedup:.2f}× means speculation was slower than plain decoding.")
    if even is None:
        losses.append(
            f"At γ = {gamma} with c = {cost:.2f} and a verify pass of {verify_cost:.2f} target passes, "
            "even a draft that is always right cannot win: the drafting costs more than the passes it saves."
        )
    else:
        losses.append(
            f"At γ = {gamma}, c = {cost:.2f} and a verify pass of {verify_cost:.2f} target passes, "
            f"speculation only wins when α is above **{even:.0%}**"
            + ("" if alpha is None else f" (this run: {alpha:.0%})")
            + "."
        )
    losses.append(
        "Temperature changes how often p and q agree, and so α: the sweep below measures it at three temperatures."
    )
    return "\n\n".join(losses)


def sweep_findings(table: pd.DataFrame) -> list[str]:
    """The sweep's mean α per temperature, and its best and worst run."""
    by_temperature = table.groupby("temperature")["alpha"].mean().dropna()
    best = table.loc[table["measured_speedup"].idxmax()]
    worst = table.loc[table["measured_speedup"].idxmin()]
    return [
        "Mean α over γ: " + ", ".join(f"**{a:.0%}** at temperature {t:g}" for t, a in by_temperature.items()) + ".",
        f"Best: **{best['measured_speedup']:.2f}×** at γ = {int(best['gamma'])}, temperature "
        f"{best['temperature']:g}. Worst: **{worst['measured_speedup']:.2f}×** at γ = {int(worst['gamma'])}, "
        f"temperature {worst['temperature']:g}"
        + (" — slower than plain decoding." if worst["measured_speedup"] < 1 else "."),
    ]


def timeline_caption(tokens: int) -> str:
    return (
        "Wall time on this machine: every draft pass and verify pass of this run, and plain decoding "
        f"(one target pass and one draw per token) of the same {tokens} tokens, timed just now. "
        "The machine is shared: a single run can be stretched by other programs."
    )


def sweep_heading(gammas, temperatures) -> str:
    return f"Sweep: γ = {gammas[0]}…{gammas[-1]} at temperature " + ", ".join(f"{t:g}" for t in temperatures)


def sweep_not_yet(runs: int, tokens: int) -> str:
    return f"{runs} speculative runs of {tokens} tokens, each timed against plain decoding of its text."


def sweep_speed_caption(tokens: int) -> str:
    return (
        f"Solid: measured speed-up of each run ({tokens} tokens, seed 0, temperature "
        "the only sampling setting). Dashed: predicted from the same run's α, c and verify cost."
    )
