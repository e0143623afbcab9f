"""A shared Generate link replays the run it was copied from, token for token.

The URL's sliders hold the settings now; a run can have changed them mid-way (a slider moved at step 10, a fork
re-chosen with other sliders, another seed). Each record keeps the settings and seed it was drawn with, so the link
carries the steps whose settings or seed differ from the URL's: `schedule_param` encodes them as runs of steps
(`[first step, {field: value, ...}, seed]`, JSON, zlib, URL-safe base64), and `step_plan` turns them back into one
(settings, seed) per step. A run drawn all with the URL's settings and seed needs no parameter: links stay short.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import fields

from inference.sampling.pipeline import SamplingSettings

INIT_FIELDS = [f.name for f in fields(SamplingSettings) if f.init]  # what a link can set (not derived fields)
TUPLE_FIELDS = {f.name for f in fields(SamplingSettings) if f.init and "tuple" in str(f.type)}
MAX_PARAM_CHARS = 4000  # a longer schedule is refused (the link would not survive being pasted)


class LinkError(ValueError):
    """A schedule in a link that cannot be read: the sentence says so, and the plain replay is used."""


def _diff(settings: SamplingSettings, base: SamplingSettings) -> dict:
    now, was = _values(settings), _values(base)
    return {name: list(v) if isinstance(v, tuple) else v for name, v in now.items() if v != was[name]}


def _values(settings: SamplingSettings) -> dict:
    return {name: getattr(settings, name) for name in INIT_FIELDS}


def schedule_param(records, current: SamplingSettings, current_seed: int) -> str | None:
    """The URL value that replays `records` under a link whose sliders say `current` and `current_seed`, or None
    when every record was drawn with exactly those."""
    if all(r.settings == current and r.seed == current_seed for r in records):  # every rerun asks: the usual answer
        return None
    segments = []
    for record in records:
        entry = [_diff(record.settings, current), int(record.seed)]
        if segments and segments[-1][1:] == entry:
            continue
        segments.append([record.index, *entry])
    if all(diff == {} and seed == current_seed for _, diff, seed in segments):
        return None
    packed = zlib.compress(json.dumps(segments, separators=(",", ":")).encode(), 9)
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def step_plan(param: str, steps: int, current: SamplingSettings, current_seed: int) -> list[tuple]:
    """One (settings, seed) per step 0..steps-1 from a link's schedule (None or empty: the URL's for all)."""
    if not param:
        return [(current, current_seed)] * steps
    if len(param) > MAX_PARAM_CHARS:
        raise LinkError(f"The link's step schedule is {len(param):,} characters long (at most {MAX_PARAM_CHARS:,}).")
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(param + "=" * (-len(param) % 4)))
        segments = json.loads(raw)
        plan_from = []
        for first, diff, seed in segments:
            values = {k: tuple(v) if k in TUPLE_FIELDS else v for k, v in diff.items()}
            plan_from.append((int(first), SamplingSettings(**{**_values(current), **values}), int(seed)))
    except Exception as err:  # a damaged or hand-edited link: one sentence, never a traceback
        raise LinkError(
            "The link's step schedule (`sched`) could not be read, so its steps replay with the link's sliders."
        ) from err
    plan_from.sort(key=lambda entry: entry[0])
    plan, k = [], 0
    for step in range(steps):
        while k + 1 < len(plan_from) and plan_from[k + 1][0] <= step:
            k += 1
        plan.append(
            (plan_from[k][1], plan_from[k][2]) if plan_from and plan_from[0][0] <= step else (current, current_seed)
        )
    return plan


def replay(trace, param: str, steps: int, current: SamplingSettings, current_seed: int) -> str | None:
    """Step `trace` through a shared link's first `steps` steps, each with the settings and seed it was drawn with
    (the link's schedule `param`); a schedule that cannot be read replays with the link's sliders, and its sentence
    is returned for the page to show."""
    problem = None
    try:
        plan = step_plan(param, steps, current, current_seed)
    except LinkError as err:
        problem, plan = str(err), step_plan("", steps, current, current_seed)
    for step_settings, step_seed in plan:
        if trace.step(step_settings, step_seed) is None:
            break
    return problem
