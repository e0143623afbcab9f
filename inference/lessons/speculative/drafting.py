"""Which drafter a speculative run uses: a draft model that fits the target, or prompt lookup when none does.

The page tries the bundled draft first, then a draft the visitor names; whatever cannot serve the target (it did
not load, or it uses another tokenizer) leaves prompt lookup running, which needs no second model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from inference.core.loader import LoadedModel, ModelLoadError
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.routing import BUNDLED_MOE_DIR, BUNDLED_MOE_NAME
from inference.core.run import SEED_MAX
from inference.lessons.speculative import bundled_drafts, feature_draft, self_draft, shortlist, sweep
from inference.lessons.speculative import run as spec  # the module, so a test can refuse every pair in one place
from inference.lessons.speculative.drafters import GAMMA_MAX, GAMMA_MIN, ModelDrafter, PromptLookupDrafter


@dataclass(frozen=True)
class DraftAttempt:
    """A draft model that can serve the target, or why not (`load_failed`: it did not even load)."""

    draft: LoadedModel | None
    problem: str | None = None
    load_failed: bool = False


def try_draft(target, target_tokenizer, load: Callable[[], LoadedModel]) -> DraftAttempt:
    """Load a draft with `load()` (which may raise ModelLoadError) and check it can draft for the target."""
    try:
        draft = load()
    except ModelLoadError as err:
        return DraftAttempt(None, str(err), load_failed=True)
    try:
        spec.check_pair(target, target_tokenizer, draft.model, draft.tokenizer)
    except spec.SpeculationError as err:
        return DraftAttempt(None, str(err))
    return DraftAttempt(draft)


SHORTLIST_ALL = 0  # the page's value for a draft that scores every token


def draft_counts(draft: LoadedModel | None):
    """A bundled draft's training-text token counts (`shortlist.token_counts`); None for any other draft: the page
    reads no file of a visitor's model beyond what loading it reads."""
    folder = None if draft is None else bundled_drafts.bundled_dir(draft.info.name)
    return None if folder is None else shortlist.token_counts(folder)


def shortlist_sizes(draft: LoadedModel | None) -> list[int]:
    """The shortlist sizes this draft offers (empty: it scores every token)."""
    if draft is None:
        return []
    return shortlist.usable_sizes(draft_counts(draft), spec.vocabulary_rows(draft.model))


def shortlist_ids(draft: LoadedModel | None, size: int) -> list[int] | None:
    """The token ids the draft scores at this shortlist size, or None for every token."""
    if size == SHORTLIST_ALL or size not in shortlist_sizes(draft):
        return None
    return shortlist.most_frequent(draft_counts(draft), size)


def new_drafter(target, draft: LoadedModel | None, shortlist_size: int = SHORTLIST_ALL):
    """A fresh drafter for one run: the draft model's (scoring only its `shortlist_size` most frequent tokens where it
    has counts), or prompt lookup over the target's vocabulary."""
    if draft is not None:
        return ModelDrafter(draft.model, draft.tokenizer, shortlist_ids(draft, shortlist_size))
    return PromptLookupDrafter(spec.vocabulary_rows(target))


def other_side(target_name: str) -> tuple[str, str] | None:
    """For a bundled target, the other bundled target the draft serves: (its name, its source for the loader, "" the
    bundled dense model). The sweep measures both, so the page shows speculation on two targets with the same draft,
    and where it wins or loses on this machine. None for any other target."""
    if target_name == BUNDLED_MODEL_NAME and BUNDLED_MOE_DIR.is_dir():
        return BUNDLED_MOE_NAME, str(BUNDLED_MOE_DIR)
    if target_name == BUNDLED_MOE_NAME:
        return BUNDLED_MODEL_NAME, ""
    return None


def sweep_targets(target: tuple, other: tuple[str, str] | None, load: Callable[[str], LoadedModel]) -> list[tuple]:
    """The sweep's (name, model, tokenizer) targets: the page's, then the `other_side` one when there is one (loaded
    by `load(source)`)."""
    if other is None:
        return [target]
    loaded = load(other[1])
    return [target, (other[0], loaded.model, loaded.tokenizer)]


def start_run(target, tokenizer, make_drafter, ids: list[int], new_tokens: int, gamma: int, seed: int):
    """(a new speculative run, None), or (None, why it could not start) for the page to say."""
    try:
        return spec.new_run(target, tokenizer, make_drafter(), ids, new_tokens, gamma=gamma, seed=seed), None
    except spec.SpeculationError as err:
        return None, str(err)


def page_sweep(target: tuple, other, load, make_drafter, ids: list[int], progress) -> pd.DataFrame:
    """The page's sweep over γ and temperature, on its target and the `other_side` one (see `sweep_targets`)."""
    return sweep.sweep_sides(sweep_targets(target, other, load), make_drafter, ids, progress=progress)


DRAFTERS = {  # the page's choice -> its label
    "draft": "Draft model",
    "feature": "Feature draft (reads the target's last layer)",
    "self": "Self-draft (its own first layers)",
    "lookup": "Prompt lookup (no model)",
}


def drafter_choices(target) -> list[str]:
    """The page's drafters for this target: a self-draft only where `self_draft.layer_draft` can build one, a
    feature draft only where the bundled one reads this target's hidden states (SmolLM2)."""
    offered = {"self": self_draft.can_self_draft(target), "feature": feature_draft.fits(target)}
    return [d for d in DRAFTERS if offered.get(d, True)]


def self_drafter(target, tokenizer, layers: int, shortlisted: bool) -> ModelDrafter:
    """A fresh self-speculative drafter: the target's first `layers` layers, final norm and output layer (shared, not
    copied), scoring the tokenizer's first `self_draft.SHORTLIST_ROWS` ids when `shortlisted`."""
    draft = self_draft.layer_draft(target, layers)
    rows = self_draft.tokenizer_shortlist(target) if shortlisted else None
    return ModelDrafter(draft, tokenizer, rows)


SHORTLIST_CHOICES = (*shortlist.SIZES, *shortlist.LARGE_SIZES, SHORTLIST_ALL)  # what a link's `sl` may say
PAGE_RANGES = {"spec_gamma": (GAMMA_MIN, GAMMA_MAX), "spec_seed": (0, SEED_MAX)}  # URL values allowed
# URL parameter -> (widget key, type), besides the sampling knobs: a shared link reopens the same prompt, drafter,
# settings and seed
PAGE_URL_PARAMS = {
    "prompt": ("spec_prompt", str),
    "d": ("spec_drafter", str),
    "sl": ("spec_shortlist", int),
    "g": ("spec_gamma", int),
    "seed": ("spec_seed", int),
    "max": ("spec_max_new", int),
}
PAGE_NAMES = {"spec_gamma": "γ (tokens drafted per round)", "spec_max_new": "max new tokens"}  # in URL warnings
# On a model trained elsewhere (an assistant such as SmolLM2), the page opens on a request whose answer copies the
# prompt, in the chat template, with prompt lookup: the drafter that beat plain decoding there when measured
# (inference/bench/real_spec.py); the self-draft lost at every depth.
COPY_PROMPT = (
    "Write this paragraph out again, word for word: The old lighthouse stood on the rocks at the edge of the bay. "
    "Every night its keeper climbed the hundred steps, lit the great lamp, and watched the ships pass safely into the "
    "harbour until the sun came up again."
)
CHAT_PROMPT = "What is the capital of France, and why is it famous?"
PAGE_DEFAULTS = {  # what the Speculative page opens on (widget key -> value)
    "spec_prompt": "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "spec_drafter": "draft",
    "spec_shortlist": shortlist.DEFAULT_SIZE,
    "spec_self_layers": self_draft.DEFAULT_LAYERS,
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


def page_defaults(story_model: bool, has_chat_template: bool, draft_dir=None, feature_fits: bool = False) -> dict:
    """`PAGE_DEFAULTS` for the loaded model: a story model continues a story; a model with a bundled draft of its own
    (`draft_dir`: SmolLM2's, `bundled_drafts.draft_dir_for`) gets a story request in its chat template, greedy, with
    its fastest drafter as measured when shipped: the feature draft where it reads this model (`feature_fits`;
    1.32× plain decoding on that request against the distilled draft's 1.17×, their speculation.json), else the
    distilled draft at the shortlist and γ it was measured at; any other model gets `COPY_PROMPT` (in its chat
    template when it has one) with prompt lookup."""
    if story_model:
        return dict(PAGE_DEFAULTS)
    if draft_dir is not None and draft_dir != spec.BUNDLED_DRAFT_DIR and has_chat_template:
        return {
            **PAGE_DEFAULTS,
            "spec_drafter": "feature" if feature_fits else "draft",
            "spec_prompt": bundled_drafts.STORY_REQUEST,
            "spec_chat": True,
            "spec_temperature": 0.0,  # what the draft was trained for: the target's greedy text
            "spec_shortlist": bundled_drafts.default_shortlist(draft_dir.name),
            "spec_gamma": bundled_drafts.default_gamma(draft_dir.name, PAGE_DEFAULTS["spec_gamma"]),
        }
    return {**PAGE_DEFAULTS, "spec_prompt": COPY_PROMPT, "spec_drafter": "lookup", "spec_chat": has_chat_template}


def link_values(state, shortlist_size: int) -> dict[str, str]:
    """What a shared link says besides the sampling knobs, read from the page's widget values in `state` (the
    prompt cut to 1,000 characters)."""
    values = {param: state[key] for param, (key, _) in PAGE_URL_PARAMS.items() if param != "sl"}
    return {
        **{param: str(value) for param, value in values.items()},
        "prompt": str(state["spec_prompt"])[:1000],
        "sl": str(shortlist_size),
    }


def default_self_layers(options: list[int], current) -> int:
    """The self-draft's depth: the visitor's when the target offers it, else the middle choice."""
    return current if current in options else options[len(options) // 2]


def run_kind(self_layers: int | None, draft, feature=None) -> str:
    if feature is not None:
        return "feature"
    return "self" if self_layers else "draft" if draft is not None else "lookup"


def make_drafter(
    target, tokenizer, self_layers: int | None, draft: LoadedModel | None, shortlist_size: int, feature=None
):
    """The page's drafter: the feature draft, else a self-draft of `self_layers` layers, else the draft model, else
    prompt lookup."""
    if feature is not None:
        return feature_draft.FeatureDrafter(feature, target, tokenizer)
    if self_layers:
        return self_drafter(target, tokenizer, self_layers, shortlist_size != SHORTLIST_ALL)
    return new_drafter(target, draft, shortlist_size)
