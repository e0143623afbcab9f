"""The page's sweep: measured and predicted speed-up at each γ and temperature, on the page's target and on the other
bundled target beside it, so the page shows where speculation wins on this machine and where it loses."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from inference.core import machine
from inference.core.measuring import Progress
from inference.core.quantize import weight_bytes  # tied weights counted once
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import compare
from inference.lessons.speculative.summary import expected_tokens_per_pass
from inference.sampling.pipeline import SamplingSettings

SWEEP_GAMMAS = tuple(range(1, 9))
SWEEP_TEMPERATURES = (0.0, 0.8, 1.2)
SWEEP_NEW_TOKENS = 48


def sweep(
    target,
    tokenizer,
    make_drafter: Callable[[], object],
    prompt_ids: list[int],
    new_tokens: int = SWEEP_NEW_TOKENS,
    gammas=SWEEP_GAMMAS,
    temperatures=SWEEP_TEMPERATURES,
    seed: int = 0,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Measured and predicted speed-up at each γ and temperature: one speculative run each (a fresh drafter), and
    plain decoding of its text. Temperature is the only sampling knob on."""
    rows, total = [], len(gammas) * len(temperatures)
    for t in temperatures:
        settings = SamplingSettings(temperature=t)
        for g in gammas:
            if progress:
                progress(len(rows), total, f"γ = {g}, temperature {t:g}")
            run = spec.new_run(
                target, tokenizer, make_drafter(), prompt_ids, new_tokens, gamma=g, seed=seed, stop_at_eos=False
            )
            list(run.run(settings))
            result = compare(run, settings)
            alpha = result.summary.acceptance_rate
            rows.append(
                {
                    "temperature": t,
                    "gamma": g,
                    "alpha": alpha,
                    "tokens_per_pass": result.summary.tokens_per_target_pass,
                    "predicted_tokens_per_pass": expected_tokens_per_pass(alpha or 0.0, g),
                    "speculative_ms_per_token": result.summary.ms_per_token,
                    "plain_ms_per_token": result.plain.total_ms / len(run.generated_ids),
                    "measured_speedup": result.measured_speedup,
                    "cost_ratio": result.cost_ratio,
                    "predicted_with_overheads": result.predicted_with_overheads(),
                    "verify_cost": result.verify_cost,
                    "predicted_speedup": result.predicted_speedup(),
                    "predicted_speedup_measured_verify": result.predicted_speedup(measured_verify=True),
                }
            )
    if progress:
        progress(total, total, "done")
    return pd.DataFrame(rows)


def sweep_runs() -> int:
    """Speculative runs in one sweep of one target."""
    return len(SWEEP_GAMMAS) * len(SWEEP_TEMPERATURES)


def sweep_sides(
    sides: list[tuple[str, object, object]],
    make_drafter: Callable[[], object],
    prompt_ids: list[int],
    new_tokens: int = SWEEP_NEW_TOKENS,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """`sweep` on each (name, target, tokenizer) with the same drafter and prompt, one table with a `target` column and
    each target's `weight_bytes` and `fits_cache` (its weights no larger than this machine's last-level cache; None
    where the cache size is unknown): what decides whether a pass of several tokens costs little more than one."""
    tables = []
    for index, (name, target, tokenizer) in enumerate(sides):

        def step(done, total, text, index=index, name=name):
            if progress:
                progress(index * total + done, len(sides) * total, f"{name}: {text}")

        table = sweep(target, tokenizer, make_drafter, prompt_ids, new_tokens, progress=step)
        size = weight_bytes(target)
        tables.append(table.assign(target=name, weight_bytes=size, fits_cache=machine.weights_fit_in_cache(size)))
    return pd.concat(tables, ignore_index=True)
