"""The drafts this project ships, and which one serves a target: the storytellers' `storyteller-draft-1m`, and
`smollm2-draft-14m` for SmolLM2-135M-Instruct (trained here by `inference.training.distill_real`).

A target gets the bundled draft whose output layer has as many rows as its own (read from the drafts' config files,
before anything loads); `spec.check_pair` then checks the tokenizers themselves. A target no bundled draft fits gets
the storyteller's draft, which `check_pair` refuses with its reason, as before.

Each draft folder may hold `speculation.json`: its greedy acceptance and speed-up on SmolLM2, measured when it was
shipped by `python -m inference.bench.real_spec --write-draft` (the bench's own runs), on
a story request (where it was trained), on a question outside stories and on three other requests; the page quotes it
in one sentence.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from inference.core.paths import MODELS_DIR
from inference.lessons.speculative import run as spec
from inference.lessons.speculative import shortlist
from inference.lessons.speculative.feature_draft import FEATURE_DRAFT_DIR, FEATURE_DRAFT_NAME

REAL_DRAFT_NAME = "smollm2-draft-14m"
REAL_DRAFT_DIR = MODELS_DIR / REAL_DRAFT_NAME
DRAFT_DIRS = (spec.BUNDLED_DRAFT_DIR, REAL_DRAFT_DIR)
MEASURED_FILE = "speculation.json"
# SmolLM2's story request (not one of the teacher's training requests) and its question outside stories
STORY_REQUEST = "Write a short story about a boy who finds a lost kitten on a rainy day."
QUESTION = "What is the capital of France, and why is it famous?"
# Three more ordinary requests, measured beside those two so that a draft's figures are not only its best requests
# (their topics are left out of the teacher text too: tests/test_teacher_text.py)
OTHER_REQUESTS = (
    "Why is the sky blue?",
    "Give me a simple recipe for pancakes.",
    "Write a short poem about the sea.",
)


@lru_cache(maxsize=8)
def _rows(folder: str) -> int | None:
    try:
        return int(json.loads((Path(folder) / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def draft_dir_for(target) -> Path:
    """The bundled draft for this target: the one with as many vocabulary rows as the target, else the storyteller's
    (which `check_pair` then refuses, saying why)."""
    rows = spec.vocabulary_rows(target)
    for folder in DRAFT_DIRS:
        if _rows(str(folder)) == rows:
            return folder
    return spec.BUNDLED_DRAFT_DIR


def bundled_dir(name: str | None) -> Path | None:
    """The folder of the bundled draft (or feature draft) called `name`, None for any other model."""
    return next((folder for folder in (*DRAFT_DIRS, FEATURE_DRAFT_DIR) if folder.name == name), None)


def default_shortlist(name: str | None) -> int:
    """The shortlist a bundled draft opens with: its measured choice in `speculation.json`, else the page's."""
    measured = measured_figures(name)
    return int(measured.get("shortlist", shortlist.DEFAULT_SIZE)) if measured else shortlist.DEFAULT_SIZE


def default_gamma(name: str | None, fallback: int) -> int:
    """The γ a bundled draft opens with: the one it was measured at in `speculation.json`, else `fallback`."""
    return int(measured_figures(name).get("gamma", fallback))


def measured_figures(name: str | None) -> dict:
    folder = bundled_dir(name)
    try:
        return json.loads((folder / MEASURED_FILE).read_text()) if folder else {}
    except (OSError, ValueError):
        return {}


def training_line(name: str | None) -> str | None:
    """One sentence on what a bundled draft is and what it learned from, read from its training_meta.json; None for
    a draft without one (the storyteller's has its own model card)."""
    folder = bundled_dir(name)
    try:
        meta = json.loads((folder / "training_meta.json").read_text()) if folder else None
    except (OSError, ValueError):
        return None
    if not meta or "teacher_text" not in meta:
        return None
    if "heldout_first_guess_agreement" in meta:  # the feature draft
        taught = meta["teacher_text"]
        return (
            f"The draft is {folder.name}: one decoder layer of SmolLM2's shape that reads SmolLM2's own last hidden "
            "state (EAGLE's idea) and scores its "
            f"{meta['settings']['shortlist']:,} most frequent tokens with SmolLM2's output layer, trained here on "
            f"{taught['replies_trained']:,} of SmolLM2's greedy replies to story requests and general questions."
        )
    s, st, taught = meta["settings"], meta["stats"], meta["teacher_text"]
    return (
        f"The draft is {folder.name}: a {st['parameters'] / 1e6:.1f}M-parameter Llama ({s['num_layers']} layers of "
        f"width {s['hidden_size']}, SmolLM2's tokenizer), trained here on {st['train_tokens_in_corpus']:,} tokens of "
        f"TinyStories and then on {taught['replies_trained']:,} of SmolLM2's own greedy replies to story requests."
    )


def acceptance_line(name: str | None) -> str | None:
    """One sentence with the draft's measured greedy acceptance on a story request and on a question, or None."""
    m = measured_figures(name)
    if not m:
        return None
    story, question = m["story"], m["question"]
    if name == FEATURE_DRAFT_NAME:  # trained on stories and questions alike
        line = (
            f"Measured when shipped (greedy, γ {m['gamma']}, {m['cpu']}): on a story request it kept "
            f"{story['acceptance_rate']:.0%} of its guesses and ran {story['speedup_vs_plain']:.2f}× plain decoding; "
            f"on a question it kept {question['acceptance_rate']:.0%} ({question['speedup_vs_plain']:.2f}×)."
        )
    else:
        line = (
            f"Measured when shipped (greedy, γ {m['gamma']}, {m['cpu']}): on a story request, where it was trained, "
            f"it kept {story['acceptance_rate']:.0%} of its guesses and ran {story['speedup_vs_plain']:.2f}× plain "
            f"decoding; on a question outside stories it kept {question['acceptance_rate']:.0%} "
            f"({question['speedup_vs_plain']:.2f}×)."
        )
    return line + others_sentence(m.get("others") or [])


def others_sentence(others: list[dict]) -> str:
    """' On 3 other requests (“…”, …) it ran 0.92× to 1.05×, 1 of them slower than plain decoding, keeping 30% to
    41%.', from the measurements of `OTHER_REQUESTS`; '' without any."""
    if not others:
        return ""
    speeds = sorted(o["speedup_vs_plain"] for o in others)
    kept = sorted(o["acceptance_rate"] for o in others)
    below = sum(s < 1 for s in speeds)
    slower = f", {below} of them slower than plain decoding" if below else ""
    asked = ", ".join(f"“{o['request']}”" for o in others)
    return (
        f" On {len(others)} other requests ({asked}) it ran {speeds[0]:.2f}× to {speeds[-1]:.2f}×{slower}, keeping "
        f"{kept[0]:.0%} to {kept[-1]:.0%}."
    )


def about(name: str | None) -> str | None:
    """The page's sentence on a bundled draft with a training record (SmolLM2's): what it is, and its measured
    acceptance where it was trained and outside it. None for any other drafter."""
    lines = [line for line in (training_line(name), acceptance_line(name)) if line]
    return " ".join(lines) or None
