"""Moved: every stage is in `inference.sampling.stages` now. This module only keeps three importers working until
they import from there (inference/core/run.py, inference/lessons/compare/shared_draws.py,
app_pages/shared/sampler_controls.py); delete it then."""

from inference.sampling.stages import dry_breaker_ids as dry_breaker_ids
from inference.sampling.stages import xtc_uniforms as xtc_uniforms
