"""What another app host needs to rebuild the teacher's run: a small JSON checkpoint stored with every publish.

The prompt's token ids and, for every step, the token drawn with its seed and settings (only the knobs that
differ from the defaults), plus the open guessing round. `resume.take_up` replays it (see there).
"""

from __future__ import annotations

from dataclasses import fields

from inference.sampling.pipeline import SamplingSettings

_DEFAULT = SamplingSettings()
_SAVED = [f.name for f in fields(SamplingSettings) if f.init and f.name != "allowed_tokens"]


def settings_dict(settings: SamplingSettings) -> dict:
    """The knobs that differ from the defaults, JSON-safe (a class's run has no format mask)."""
    out = {}
    for name in _SAVED:
        value = getattr(settings, name)
        if value != getattr(_DEFAULT, name):
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def settings_from(saved: dict) -> SamplingSettings:
    return SamplingSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})


def checkpoint(run) -> dict:
    """What another host needs to rebuild `run` (a `TeacherRun`): small JSON, stored with every publish."""
    trace = run.trace
    return {
        "model": run.model_name,
        "prompt_ids": list(trace.prompt_ids),
        "max_new_tokens": trace.max_new_tokens,
        "seed": trace.seed,
        "steps": [[r.token_id, r.seed, settings_dict(r.settings)] for r in trace.records],
        "settings": settings_dict(run.settings),
        "run_id": run.run_id,
        "guess_step": run.guess_step,
        "guessed_choices": run.guessed_choices,
        "last_reveal": run.last_reveal,
    }
