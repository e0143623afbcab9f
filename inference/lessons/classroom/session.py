"""A class follows the teacher's run: what the teacher publishes after every change, and the reveal.

The teacher's session holds the real run (a `Trace` on the loaded model); students never run the model.
After every Step, Back, settings change or guess opened, the teacher's page publishes a small JSON state
(`TeacherRun.publish`): the text so far (token labels), the settings, the coming step's top tokens with their raw
and final probabilities, and the last reveal (the class's answers beside the model's probabilities and the draw).
Followers poll it (one store read a second) and redraw only when its version changed.
"""

from __future__ import annotations

import random

import torch

from inference.core.remote import returned_probability
from inference.core.tokens import readable_token
from inference.lessons.classroom.store import SOMETHING_ELSE, Tally
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

OFFERED = 10  # students pick among the top 10 tokens of the final distribution, or "something else"
SHOWN = 15  # bars on the followers' chart
STEP_BUTTON = "Draw and reveal"  # the teacher's button; the intro names it by this label
INTRO = (
    "The teacher's run on every screen. The teacher opens a guess, each student picks the next token, then "
    f"**{STEP_BUTTON}** shows the class's guesses beside the model's probabilities and where the random draw landed. "
    "While guessing is open, no screen shows the model's candidates, the projected teacher's screen included."
)


def step_key(run_id: str, step: int, seed: int) -> str:
    """Names one guessing round: the run, the step and the seed (repeating a step with another seed is a new
    round, so answers of the first round are not counted in the second)."""
    return f"{run_id}:{step}:{seed}"


def next_choices(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, tokenizer) -> list[dict]:
    """The coming step's most likely tokens, computed exactly by the app's own pipeline: id, label, raw and
    final probability, in the model's order (most likely first, by final probability)."""
    view = step_view(logits, settings, seen)
    n = min(SHOWN, view.sorted_prefix)
    ids = view.order[:n].tolist()
    raw, final = view.probs["raw"][:n].tolist(), view.final[:n].tolist()
    return [
        {"id": int(t), "label": readable_token(tokenizer, int(t)), "raw": float(r), "final": float(f)}
        for t, r, f in zip(ids, raw, final)
    ]


def options_for_guessing(choices: list[dict], shuffle_seed: int) -> list[dict]:
    """The top tokens offered to students, in a shuffled order: offered in the model's order, the order itself
    would give the answer away."""
    offered = [dict(id=c["id"], label=c["label"]) for c in choices[:OFFERED]]
    random.Random(shuffle_seed).shuffle(offered)
    return offered


TEACHER_CHOICES_CAPTION = "The coming step's top tokens, from the teacher's model and settings, over all its tokens."
TEACHER_TOP_N_CAPTION = "The coming step's top tokens, from the teacher's model and settings."  # an engine's top N
FOLLOWER_CHOICES_CAPTION = "The teacher's model and settings, live: the coming step's top tokens."


def distribution_of(logits: torch.Tensor | None) -> dict | None:
    """How much of the coming step's distribution the teacher's model gave: all of it when the model runs in the
    app; a serving engine may return only its top N (the rest -inf), whose share of the probability is then known."""
    if logits is None:
        return None
    count, mass = returned_probability(logits)
    return {"returned": count, "vocabulary": int(logits.numel()), "mass": mass}


def choices_caption(distribution: dict | None, teacher: bool) -> tuple[str, str]:
    """(caption kind, sentence) under the choices chart: computed exactly over the whole vocabulary, else measured
    from the engine's top N and said so."""
    if not distribution or distribution["returned"] >= distribution["vocabulary"]:
        return "exact", TEACHER_CHOICES_CAPTION if teacher else FOLLOWER_CHOICES_CAPTION
    return "measured", (
        f"{TEACHER_TOP_N_CAPTION if teacher else FOLLOWER_CHOICES_CAPTION} The engine returned its top "
        f"{distribution['returned']:,} of {distribution['vocabulary']:,} tokens ({distribution['mass']:.2%} of the "
        "probability); the shares are renormalised over them."
    )


def reveal(tally: Tally | None, choices: list[dict], record, drawn_label: str | None = None) -> dict:
    """The class's answers beside the model's probabilities and the draw that was made, for one step.

    `choices` are the step's top tokens as they were offered (computed before the draw); `record` is the
    `StepRecord` of the draw; `tally` is None when the teacher drew without opening guessing. A draw below the
    offered tokens (rank 78 at the default seed) gets a row of its own, so the chart shows it wherever it ranks;
    `drawn_label` is its readable label (whitespace shown, as the offered tokens'), else its raw text.
    """
    guessed = tally is not None
    tally = tally or Tally("", {}, {}, {}, 0)
    by_id = {c["id"]: c for c in choices}
    rows = []
    for rank, c in enumerate(choices[:OFFERED], start=1):
        stated = tally.stated_probs.get(c["id"], [])
        rows.append(
            {
                "id": c["id"],
                "label": c["label"],
                "answers": tally.counts.get(c["id"], 0),
                "share": tally.counts.get(c["id"], 0) / tally.answers if tally.answers else 0.0,
                "model_prob": c["final"],
                "stated_mean": sum(stated) / len(stated) if stated else None,
                "names": tally.names.get(c["id"], []),
                "rank": rank,
            }
        )
    chosen_label = by_id[record.token_id]["label"] if record.token_id in by_id else drawn_label or record.token_text
    if all(row["id"] != record.token_id for row in rows):
        rows.append(
            {
                "id": int(record.token_id),
                "label": chosen_label,
                "answers": 0,  # not offered: a student who expected it answered "something else"
                "share": 0.0,
                "model_prob": float(record.prob),
                "stated_mean": None,
                "names": [],
                "rank": int(record.rank) + 1,
            }
        )
    return {
        "guessed": guessed,
        "answers": tally.answers,
        "something_else": tally.counts.get(SOMETHING_ELSE, 0),
        "rows": rows,
        "chosen_id": int(record.token_id),
        "chosen_label": chosen_label,
        "chosen_rank": int(record.rank) + 1,  # 1-based for people
        "chosen_prob": float(record.prob),
        "u": float(record.u),
        "step": int(record.index),
        "seed": int(record.seed),
    }


REVEAL = {
    "not_open": "Guessing was not open for this step",
    "nobody": "Nobody guessed this step",
    "outside": "{n} of {answers} picked something outside the top {offered}",
    "top": "{n} of {answers} picked '{label}', the model gave it {prob}",
    "draw": "{head}; the draw (u = {u:.3f}) picked '{label}' at rank {rank}, which the model gave {prob}.",
}


def percent(p: float) -> str:
    if p < 0.001:  # a rare draw must not read 0.0%
        return f"{100 * p:.2g}%"
    return f"{100 * p:.1f}%" if p < 0.1 else f"{100 * p:.0f}%"


def reveal_sentence(rv: dict) -> str:
    """One sentence for every screen: what most of the class picked, what the model gave it, what the draw picked.
    Plain text; the page escapes it."""
    top = max(rv["rows"][:OFFERED], key=lambda r: r["answers"])
    if not rv.get("guessed", True):
        head = REVEAL["not_open"]
    elif not rv["answers"]:
        head = REVEAL["nobody"]
    elif top["answers"] == 0 or rv["something_else"] > top["answers"]:
        head = REVEAL["outside"].format(n=rv["something_else"], answers=rv["answers"], offered=OFFERED)
    else:
        head = REVEAL["top"].format(
            n=top["answers"], answers=rv["answers"], label=top["label"], prob=percent(top["model_prob"])
        )
    return REVEAL["draw"].format(
        head=head, u=rv["u"], label=rv["chosen_label"], rank=rv["chosen_rank"], prob=percent(rv["chosen_prob"])
    )
