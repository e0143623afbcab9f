"""Which drafter a page's run uses, and the drafts this project ships.

The bundled drafts: the storytellers' `storyteller-draft-1m`, and `smollm2-draft-14m` for SmolLM2-135M-Instruct
(`inference.training.distill_real`); a target gets the one with as many output rows as its own (read from the configs
before anything loads), and `run.check_pair` checks the tokenizers. A draft folder may hold `speculation.json`, its
greedy figures on SmolLM2 measured when shipped (`python -m inference.bench.real_spec --write-draft`), which the page
quotes. Whatever cannot serve the target leaves prompt lookup running.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from inference.core.loader import LoadedModel, ModelLoadError
from inference.core.paths import BUNDLED_MODEL_NAME, MODELS_DIR
from inference.core.routing import BUNDLED_MOE_DIR, BUNDLED_MOE_NAME
from inference.core.run import SEED_MAX
from inference.lessons.speculative import drafters, feature_draft
from inference.lessons.speculative import run as spec  # the module, so a test can refuse every pair in one place
from inference.lessons.speculative.drafters import DEFAULT_SHORTLIST, SHORTLIST_SIZES, ModelDrafter

BUNDLED_DRAFT_DIR = MODELS_DIR / "storyteller-draft-1m"
REAL_DRAFT_NAME = "smollm2-draft-14m"
REAL_DRAFT_DIR = MODELS_DIR / REAL_DRAFT_NAME
DRAFT_DIRS = (BUNDLED_DRAFT_DIR, REAL_DRAFT_DIR)
MEASURED_FILE = "speculation.json"
# SmolLM2's story request (not one of the teacher's training requests), its question outside stories, and three more
# ordinary requests measured beside them (their topics are left out of the teacher text: tests/test_training.py)
STORY_REQUEST = "Write a short story about a boy who finds a lost kitten on a rainy day."
QUESTION = CHAT_PROMPT = "What is the capital of France, and why is it famous?"
OTHER_REQUESTS = ("Why is the sky blue?", "Give me a simple recipe for pancakes.", "Write a short poem about the sea.")
# A model trained elsewhere opens on a request whose answer copies the prompt, with prompt lookup: the drafter that
# beat plain decoding there when measured (inference/bench/real_spec.py).
COPY_PROMPT = (
    "Write this paragraph out again, word for word: The old lighthouse stood on the rocks at the edge of the bay. "
    "Every night its keeper climbed the hundred steps, lit the great lamp, and watched the ships pass safely into the "
    "harbour until the sun came up again."
)
SHORTLIST_ALL = 0  # the page's value for a draft that scores every token
DRAFTERS = {  # the page's choice -> its label
    "draft": "Draft model",
    "feature": "Feature draft (reads the target's last layer)",
    "self": "Self-draft (its own first layers)",
    "lookup": "Prompt lookup (no model)",
}
PAGE_DEFAULTS = {  # what the Speculative page opens on (widget key -> value)
    "spec_prompt": "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "spec_drafter": "draft",
    "spec_shortlist": DEFAULT_SHORTLIST,
    "spec_self_layers": drafters.SELF_DRAFT_LAYERS,
    "spec_self_shortlist": True,
    "spec_gamma": 4,
    "spec_temperature": 0.8,
    "spec_top_p": 1.0,
    "spec_top_k": 0,
    "spec_min_p": 0.0,
    "spec_seed": 0,
    "spec_max_new": 60,
    "spec_chat": False,
}
PAGE_RANGES = {"spec_gamma": (drafters.GAMMA_MIN, drafters.GAMMA_MAX), "spec_seed": (0, SEED_MAX)}
PAGE_URL_PARAMS = {  # URL parameter -> (widget key, type), besides the sampling knobs
    "prompt": ("spec_prompt", str),
    "d": ("spec_drafter", str),
    "sl": ("spec_shortlist", int),
    "g": ("spec_gamma", int),
    "seed": ("spec_seed", int),
    "max": ("spec_max_new", int),
}
PAGE_NAMES = {"spec_gamma": "γ (tokens drafted per round)", "spec_max_new": "max new tokens"}  # in URL warnings
SHORTLIST_CHOICES = (*SHORTLIST_SIZES, SHORTLIST_ALL)  # what a link's `sl` may say


@lru_cache(maxsize=8)
def _rows(folder: str) -> int | None:
    try:
        return int(json.loads((Path(folder) / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def draft_dir_for(target) -> Path:
    """The bundled draft with as many vocabulary rows as the target, else the storyteller's (then refused, saying why)."""
    rows = spec.vocabulary_rows(target)
    return next((folder for folder in DRAFT_DIRS if _rows(str(folder)) == rows), BUNDLED_DRAFT_DIR)


def read_json(name: str | None, file: str) -> dict:
    """A bundled draft's json file (`speculation.json`, `training_meta.json`), {} for any other model or none."""
    folder = next((f for f in (*DRAFT_DIRS, feature_draft.FEATURE_DRAFT_DIR) if f.name == name), None)
    try:
        return json.loads((folder / file).read_text()) if folder else {}
    except (OSError, ValueError):
        return {}


def default_shortlist(name: str | None) -> int:
    return int(read_json(name, MEASURED_FILE).get("shortlist", DEFAULT_SHORTLIST))


def default_gamma(name: str | None, fallback: int) -> int:
    return int(read_json(name, MEASURED_FILE).get("gamma", fallback))


def try_draft(target, target_tokenizer, load: Callable[[], LoadedModel]) -> tuple[LoadedModel | None, str | None]:
    """(a draft loaded by `load()` that can serve the target, None) or (None, why not)."""
    try:
        draft = load()
        spec.check_pair(target, target_tokenizer, draft.model, draft.tokenizer)
    except (ModelLoadError, spec.SpeculationError) as err:
        return None, str(err)
    return draft, None


def draft_counts(draft: LoadedModel | None):
    """A bundled draft's training-text token counts; None for any other (the page reads no file of a visitor's model)."""
    folder = next((f for f in DRAFT_DIRS if draft is not None and f.name == draft.info.name), None)
    return None if folder is None else drafters.token_counts(folder)


def shortlist_sizes(draft: LoadedModel | None) -> list[int]:
    """The sizes a page offers for a draft: below its vocabulary, and only with counts of its size."""
    counts = draft_counts(draft)
    if counts is None or len(counts) != spec.vocabulary_rows(draft.model):
        return []
    return [size for size in SHORTLIST_SIZES if size < len(counts)]


def shortlist_ids(draft: LoadedModel | None, size: int) -> list[int] | None:
    """The token ids the draft scores at this shortlist size, or None for every token."""
    return drafters.most_frequent(draft_counts(draft), size) if size in shortlist_sizes(draft) else None


def shortlist_choices(draft) -> dict[int, str]:
    """The shortlist sizes this draft offers, every token last, as the page lists them (empty: none offered)."""
    sizes, counts = shortlist_sizes(draft), draft_counts(draft)
    options = {s: f"{s:,} most frequent ({drafters.coverage(counts, s):.1%} of its training text)" for s in sizes}
    return options | {SHORTLIST_ALL: f"all {len(counts):,}"} if sizes else {}


def drafter_choices(target) -> list[str]:
    """A self-draft only where the target's layers can be shared, a feature draft only where it reads the target."""
    offered = {"self": drafters.can_self_draft(target), "feature": feature_draft.fits(target)}
    return [d for d in DRAFTERS if offered.get(d, True)]


def make_drafter(target, tokenizer, self_layers: int | None, draft, shortlist_size: int, feature=None):
    """The feature draft, else a self-draft of `self_layers` layers, else the draft model, else prompt lookup."""
    if feature is not None:
        return feature_draft.FeatureDrafter(feature, target, tokenizer)
    if self_layers:
        return drafters.self_drafter(target, tokenizer, self_layers, shortlist_size != SHORTLIST_ALL)
    if draft is not None:
        return ModelDrafter(draft.model, draft.tokenizer, shortlist_ids(draft, shortlist_size))
    return drafters.PromptLookupDrafter(spec.vocabulary_rows(target))


def other_side(target_name: str) -> tuple[str, str] | None:
    """For a bundled target, the other bundled target the same draft serves (name, loader source; "" the bundled
    dense model), which the sweep measures beside it. None for any other target."""
    if target_name == BUNDLED_MODEL_NAME and BUNDLED_MOE_DIR.is_dir():
        return BUNDLED_MOE_NAME, str(BUNDLED_MOE_DIR)
    return (BUNDLED_MODEL_NAME, "") if target_name == BUNDLED_MOE_NAME else None


def page_defaults(story_model: bool, has_chat_template: bool, draft_dir=None, feature_fits: bool = False) -> dict:
    """A story model continues a story; a model with a bundled draft of its own (SmolLM2) gets a story request in its
    chat template, greedy (what the drafts were trained for), with its fastest drafter as measured when shipped;
    any other gets `COPY_PROMPT` with prompt lookup."""
    if story_model:
        return dict(PAGE_DEFAULTS)
    if draft_dir is not None and draft_dir != BUNDLED_DRAFT_DIR and has_chat_template:
        return PAGE_DEFAULTS | {
            "spec_drafter": "feature" if feature_fits else "draft",
            "spec_prompt": STORY_REQUEST,
            "spec_chat": True,
            "spec_temperature": 0.0,
            "spec_shortlist": default_shortlist(draft_dir.name),
            "spec_gamma": default_gamma(draft_dir.name, PAGE_DEFAULTS["spec_gamma"]),
        }
    return PAGE_DEFAULTS | {"spec_prompt": COPY_PROMPT, "spec_drafter": "lookup", "spec_chat": has_chat_template}


def drafter_label(name: str | None, shortlist_size: int = 0) -> str:
    """ "prompt lookup (no model)", "feature draft <name>" or "draft model <name> (1,024-token shortlist)"."""
    if not name:
        return "prompt lookup (no model)"
    kind = "feature draft" if name == feature_draft.FEATURE_DRAFT_NAME else "draft model"
    return f"{kind} {name}" + (f" ({shortlist_size:,}-token shortlist)" if shortlist_size else "")
