"""The Speculative decoding page's verdicts: when a run wins or loses and why, from its measured costs and the sweep's
table. Every number is passed in; every sentence that says speculation won says so only where the measurement shows
it."""

from __future__ import annotations

import pandas as pd

from inference.core import machine
from inference.core.tokens import markdown_token_text
from inference.lessons.speculative import summary
from inference.lessons.speculative.comparison import Comparison

# A model whose weights are far larger than a CPU's cache (134.5M parameters, 4 bytes each), named where speculation
# lost; prompt lookup drafts for it without a second model.
LARGER_MODEL = "HuggingFaceTB/SmolLM2-135M (538 MB of float32 weights)"


def cost_sentence(result: Comparison, sweep_costs: list[float] | None = None) -> str:
    """How c was measured in this run and how far it moves: within the run (the draft passes' quartiles) and, once
    the sweep has run, across its runs. None of it is a property of the models alone: both are wall times here."""
    if result.cost_ratio is None:
        return (
            "c = 0 for prompt lookup: no draft model runs. Its search is not free, though; its time is in the "
            "round's other costs below."
        )
    spread, step = result.cost_ratio_range(), result.plain.decode_step
    plain = f" In full: {step.label()}." if step is not None else ""
    within = (
        ""
        if spread is None
        else f" The middle half of this run's {len(result.draft_passes_ms)} draft passes gives c from "
        f"{spread[0]:.2f} to {spread[1]:.2f}."
    )
    across = (
        f" Across the sweep's {len(sweep_costs)} runs c ran from {min(sweep_costs):.2f} to {max(sweep_costs):.2f}."
        if sweep_costs
        else ""
    )
    return (
        f"**c = {result.cost_ratio:.2f}** is measured, not a constant: the median one-token draft pass "
        f"({result.summary.draft_pass_ms:.2f} ms) over the median one-token target pass of plain decoding "
        f"({result.plain.decode_pass_ms:.2f} ms), both wall times on this shared CPU.{within}{across}{plain} "
        "A burst of other work on the machine, or a model whose passes are mostly fixed overhead, moves it between runs."
    )


def overhead_sentence(result: Comparison) -> str | None:
    """Why the formula's prediction beats the measurement, from what the run measured: the formula charges a round
    γ·c + verify target passes and nothing else; a round also searches (prompt lookup) or samples and keeps books,
    and plain decoding draws once per token. None unless the prediction beats the measurement by more than 10%."""
    predicted = result.predicted_speedup(measured_verify=True)
    overhead = result.overhead_passes_per_round()
    charged = result.predicted_with_overheads()
    if predicted is None or overhead is None or charged is None or predicted <= result.measured_speedup * 1.1:
        return None
    what = "the lookup's search, sampling and bookkeeping" if result.cost_ratio is None else "sampling and bookkeeping"
    return (
        f"The formula predicts **{predicted:.2f}×**, the run measured **{result.measured_speedup:.2f}×**. The formula "
        f"charges a round only its target passes (γ·c + verify). Measured here, the median round also spends "
        f"{overhead:.2f} target passes on {what}, outside the model passes, while plain decoding spends "
        f"{result.draw_passes_per_token():.2f} per token on its draw. With both in the formula it predicts "
        f"**{charged:.2f}×**."
    )


def run_verdict(
    result: Comparison,
    weight_bytes: int | None = None,
    sweep_costs: list[float] | None = None,
    other_target: str | None = None,
) -> list[str]:
    """This run's paragraphs under the theory chart: when speculation loses, why a verify pass costs what it costs on
    this machine (`weight_bytes`: the target's weights, for the cache sentence; `other_target`: the bundled target the
    sweep measures beside it), how c was measured, and what the formula leaves out (when its prediction beats the
    measurement)."""
    cost = result.cost_ratio or 0.0
    even = summary.break_even_alpha(result.gamma, cost, result.verify_cost)
    alpha = result.summary.acceptance_rate
    if result.summary.verify_read_prompt:  # round 0's pass read the prompt too: no verdict on costs per pass yet
        first = (
            f"Only round 0 has run, and its verify pass also read the prompt ({result.verify_cost:.2f} target passes "
            "with it). Step once more: the next round measures a verify pass alone, and this paragraph says when "
            "speculation wins on this machine."
        )
        paragraphs = [first]
    else:
        first = when_it_loses(result.measured_speedup, result.gamma, cost, result.verify_cost, even, alpha)
        paragraphs = [
            first,
            verify_sentence(result.verify_cost, result.gamma, weight_bytes, result.measured_speedup, other_target),
        ]
    paragraphs.append(cost_sentence(result, sweep_costs))
    overhead = overhead_sentence(result)
    return paragraphs + ([overhead] if overhead else [])


def verify_sentence(
    verify_cost: float, gamma: int, weight_bytes: int | None, measured_speedup: float, other_target: str | None = None
) -> str:
    """Why speculation wins or loses here, from the measured verify pass (in one-token passes) and where the target's
    weights sit: a pass that waits on reading its weights scores γ + 1 tokens for about the price of one; a pass whose
    weights stay in the CPU's cache is arithmetic and per-operation overhead, which grow with every token fed."""
    positions = gamma + 1
    said = [f"**Why:** here a verify pass of γ + 1 = {positions} tokens cost **{verify_cost:.2f}** one-token passes"]
    if verify_cost >= 0.5 * positions:
        said.append(
            f", {verify_cost / positions:.0%} of the {positions} one-token passes plain decoding would run for them: "
            "scoring them at once saves little."
        )
    elif verify_cost <= 1.5:
        said.append(": about the price of one, the case speculation is made for.")
    else:
        said.append(f", well under {positions} separate passes.")
    fits = None if weight_bytes is None else machine.weights_fit_in_cache(weight_bytes)
    cache = machine.describe_bytes(machine.last_level_cache_bytes())
    if fits:
        said.append(
            f" The target's {machine.describe_bytes(weight_bytes)} of weights fit in this machine's {cache} "
            "last-level cache, so a pass does not wait on memory: its time is arithmetic and the fixed cost of running "
            "its many small operations, and both grow with the tokens it scores."
        )
    elif fits is False:
        said.append(
            f" The target's {machine.describe_bytes(weight_bytes)} of weights do not fit in this machine's {cache} "
            "last-level cache: every pass reads them from memory, once for all the tokens it scores."
        )
    if measured_speedup < 1:
        beside = f"compare {markdown_token_text(other_target)} in the sweep below, or " if other_target else ""
        said.append(
            " Speculation is made for a target whose pass waits on reading its weights: "
            f"{beside}load a model much larger than this cache, such as {LARGER_MODEL}."
        )
    return "".join(said)


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
            f"even a draft that is always right cannot win: a round costs γ·c + verify = "
            f"{gamma * cost + verify_cost:.2f} target passes for at most γ + 1 = {gamma + 1} tokens."
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
    costs = table["cost_ratio"].dropna()
    best = table.loc[table["measured_speedup"].idxmax()]
    worst = table.loc[table["measured_speedup"].idxmin()]
    won = int((table["measured_speedup"] > 1).sum())
    return [
        "Mean α over γ: " + ", ".join(f"**{a:.0%}** at temperature {t:g}" for t, a in by_temperature.items()) + ".",
        f"**{won} of {len(table)}** runs beat plain decoding (above the red line), **{len(table) - won}** did not"
        + _sides(table)
        + ".",
        f"Best: **{best['measured_speedup']:.2f}×** at γ = {int(best['gamma'])}, temperature "
        f"{best['temperature']:g}. Worst: **{worst['measured_speedup']:.2f}×** at γ = {int(worst['gamma'])}, "
        f"temperature {worst['temperature']:g}"
        + (" — slower than plain decoding." if worst["measured_speedup"] < 1 else "."),
    ] + (
        [
            f"c, measured in each run, ran from **{costs.min():.2f}** to **{costs.max():.2f}** (median "
            f"{costs.median():.2f}): the same two models, timed on a shared CPU."
        ]
        if len(costs)
        else []
    )


def both_sides(table: pd.DataFrame) -> str | None:
    """One paragraph over a sweep on several targets (`sweep.sweep_sides`): per target, its weights, what a verify pass
    cost in one-token passes (median over the sweep) and its median and best run (single runs on a shared CPU: the
    median is the steadier figure); then which won, from those numbers. None for one target."""
    if "target" not in table or table["target"].nunique() < 2:
        return None
    parts, medians = [], {}
    for name, runs in table.groupby("target", sort=False):
        medians[name] = (runs["verify_cost"].median(), runs["measured_speedup"].median())
        parts.append(
            f"on **{markdown_token_text(name)}** ({machine.describe_bytes(int(runs['weight_bytes'].iloc[0]))} of "
            f"weights) a verify pass cost **{medians[name][0]:.2f}** one-token passes and the median run was "
            f"**{medians[name][1]:.2f}×** (best {runs['measured_speedup'].max():.2f}×)"
        )
    cheapest = min(medians, key=lambda name: medians[name][0])
    fastest = max(medians, key=lambda name: medians[name][1])
    winners = [markdown_token_text(name) for name, (_, speedup) in medians.items() if speedup > 1]
    won = (
        "no target's median run beat plain decoding"
        if not winners
        else f"the median run beat plain decoding on {' and '.join(winners)}"
    )
    return (
        "Both sides, measured just now with the same drafter: "
        + "; ".join(parts)
        + f". The cheapest verify pass (in its own target's one-token passes) was {markdown_token_text(cheapest)}'s, "
        f"the fastest median run {markdown_token_text(fastest)}'s, and {won}. Speculation pays where a pass of γ + 1 "
        "tokens costs little more than a pass of one: where reading the weights sets a pass's time (a model larger "
        "than the CPU's cache, or a GPU serving a large model), not where every token fed adds its own arithmetic."
    )


def _sides(table: pd.DataFrame) -> str:
    """Per temperature, where speculation won: the γ of its winning runs."""
    parts = []
    for temperature, runs in table.groupby("temperature"):
        winners = sorted(int(g) for g in runs.loc[runs["measured_speedup"] > 1, "gamma"])
        where = "no γ" if not winners else "γ = " + ", ".join(str(g) for g in winners)
        parts.append(f"temperature {temperature:g}: won at {where}")
    return " (" + "; ".join(parts) + ")" if parts else ""
