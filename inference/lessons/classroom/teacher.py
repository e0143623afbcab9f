"""A class follows the teacher's run: students never run the model; every action of the teacher's run (a `Trace`)
publishes a small JSON state followers poll: the text so far, the settings, the coming step's top tokens, the reveal.

Failover: each publish also stores a checkpoint (each step's token, seed and settings). When the teacher's host dies,
the teacher's browser (its sticky cookie, `BROWSER_COOKIE`, set HttpOnly by deploy/nginx.conf), reconnected to
another host, takes the class up there (`take_up`) by replaying those steps: same model and seeds, same tokens."""

from __future__ import annotations

import random
import secrets
import zlib
from dataclasses import dataclass, field

import torch

from inference.core.remote import returned_probability
from inference.core.run import Trace, new_trace
from inference.core.tokens import readable_token, readable_tokens
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, ClassStore, Tally
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

BROWSER_COOKIE = "inference_lab"  # deploy/nginx.conf: `map $cookie_inference_lab ...`
OFFERED = 10  # students pick among the top 10 tokens of the final distribution, or "something else"
SHOWN = 15  # bars on the choices chart
STEP_BUTTON = "Draw and reveal"
TEXT = {
    "intro": "The teacher's run on every screen. The teacher opens a guess, each student picks the next token, then "
    f"**{STEP_BUTTON}** shows the class's guesses beside the model's probabilities and where the random draw "
    "landed. While guessing is open, no screen shows the model's candidates, the projected teacher's screen included.",
    "choices_teacher": "The coming step's top tokens, from the teacher's model and settings{whole}.",
    "choices_follower": "The teacher's model and settings, live: the coming step's top tokens.",
    "top_n": " The engine returned its top {returned:,} of {vocabulary:,} tokens ({mass:.2%} of the probability); "
    "the shares are renormalised over them.",
    "not_open": "Guessing was not open for this step",
    "nobody": "Nobody guessed this step",
    "outside": "{n} of {answers} picked something outside the top {offered}",
    "top": "{n} of {answers} picked '{label}', the model gave it {prob}",
    "draw": "{head}; the draw (u = {u:.3f}) picked '{label}' at rank {rank}, which the model gave {prob}.",
}


def knobs(settings: SamplingSettings) -> dict:
    """The two knobs a class's run has (the page offers temperature and top-p), JSON-safe."""
    return {"temperature": settings.temperature, "top_p": settings.top_p}


def next_choices(logits: torch.Tensor, settings: SamplingSettings, seen: torch.Tensor, tokenizer) -> list[dict]:
    """The coming step's most likely tokens by the app's own pipeline: id, label, raw and final probability."""
    view = step_view(logits, settings, seen)
    n = min(SHOWN, view.sorted_prefix)
    rows = zip(view.order[:n].tolist(), view.probs["raw"][:n].tolist(), view.final[:n].tolist())
    return [{"id": int(t), "label": readable_token(tokenizer, int(t)), "raw": r, "final": f} for t, r, f in rows]


def options_for_guessing(choices: list[dict], shuffle_seed: int) -> list[dict]:
    """The top tokens offered to students, shuffled: in the model's order, the order would give the answer away."""
    offered = [dict(id=c["id"], label=c["label"]) for c in choices[:OFFERED]]
    random.Random(shuffle_seed).shuffle(offered)
    return offered


def distribution_of(logits: torch.Tensor | None) -> dict | None:
    """How much of the distribution the teacher's model gave: an engine may return only its top N (the rest -inf)."""
    if logits is None:
        return None
    count, mass = returned_probability(logits)
    return {"returned": count, "vocabulary": int(logits.numel()), "mass": mass}


def choices_caption(distribution: dict | None, teacher: bool) -> tuple[str, str]:
    """(caption kind, sentence) under the choices chart: exact over the whole vocabulary, else measured."""
    exact = not distribution or distribution["returned"] >= distribution["vocabulary"]
    sentence = TEXT["choices_teacher" if teacher else "choices_follower"].format(whole=", over all its tokens" * exact)
    return ("exact", sentence) if exact else ("measured", sentence + TEXT["top_n"].format(**distribution))


def reveal(tally: Tally | None, choices: list[dict], record, drawn_label: str | None = None) -> dict:
    """The class's answers beside the model's probabilities and the draw, for one step (`tally` None: drawn without
    guessing). A draw below the offered tokens gets a row of its own, marked with its rank."""
    guessed, tally = tally is not None, tally or Tally("", {}, {}, {}, 0)

    def row(token_id, label, prob, rank):
        stated, answers = tally.stated_probs.get(token_id, []), tally.counts.get(token_id, 0)
        share = answers / tally.answers if tally.answers else 0.0
        mean = sum(stated) / len(stated) if stated else None
        return {"id": int(token_id), "label": label, "answers": answers, "share": share, "model_prob": float(prob),
                "stated_mean": mean, "names": tally.names.get(token_id, []), "rank": rank}  # fmt: skip

    rows = [row(c["id"], c["label"], c["final"], rank) for rank, c in enumerate(choices[:OFFERED], start=1)]
    by_id = {c["id"]: c for c in choices}
    chosen_label = by_id[record.token_id]["label"] if record.token_id in by_id else drawn_label or record.token_text
    if all(r["id"] != record.token_id for r in rows):  # not offered: a student who expected it said "something else"
        rows.append(
            row(record.token_id, chosen_label, record.prob, int(record.rank) + 1) | {"answers": 0, "share": 0.0}
        )
    return dict(guessed=guessed, answers=tally.answers, something_else=tally.counts.get(SOMETHING_ELSE, 0), rows=rows,
                chosen_id=int(record.token_id), chosen_label=chosen_label, chosen_rank=int(record.rank) + 1,
                chosen_prob=float(record.prob), u=float(record.u), step=int(record.index), seed=int(record.seed))  # fmt: skip


def percent(p: float) -> str:
    if p < 0.001:  # a rare draw must not read 0.0%
        return f"{100 * p:.2g}%"
    return f"{100 * p:.1f}%" if p < 0.1 else f"{100 * p:.0f}%"


def reveal_sentence(rv: dict) -> str:
    """What most of the class picked, what the model gave it, what the draw picked (plain text: the page escapes)."""
    top = max(rv["rows"][:OFFERED], key=lambda r: r["answers"])
    if not rv.get("guessed", True):
        head = TEXT["not_open"]
    elif not rv["answers"]:
        head = TEXT["nobody"]
    elif top["answers"] == 0 or rv["something_else"] > top["answers"]:
        head = TEXT["outside"].format(n=rv["something_else"], answers=rv["answers"], offered=OFFERED)
    else:
        label, prob = top["label"], percent(top["model_prob"])
        head = TEXT["top"].format(n=top["answers"], answers=rv["answers"], label=label, prob=prob)
    label, rank, prob = rv["chosen_label"], rv["chosen_rank"], percent(rv["chosen_prob"])
    return TEXT["draw"].format(head=head, u=rv["u"], label=label, rank=rank, prob=prob)


@dataclass
class TeacherRun:
    """The teacher's run; only the store checks who may publish (with `secret`), so this holds no authority."""

    store: ClassStore
    code: str
    secret: str
    trace: Trace
    model_name: str
    settings: SamplingSettings
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    guess_step: str | None = None  # the round open for guesses ("run:step:seed"), or None
    guessed_choices: list[dict] | None = None  # the top tokens as they were when guessing opened
    last_reveal: dict | None = None

    @classmethod
    def start(cls, store, code, secret, model, tokenizer, prompt_ids, max_new_tokens, settings, seed, model_name):
        run = cls(store, code, secret, new_trace(model, tokenizer, prompt_ids, max_new_tokens, seed=seed), model_name,
                  settings)  # fmt: skip
        run.publish()
        return run

    def choices(self) -> list[dict]:
        if (logits := self.trace.peek()) is None:
            return []
        return next_choices(logits, self.settings, self.trace.seen_now(), self.trace.tokenizer)

    def publish(self) -> int:
        """What every follower's screen shows, JSON-safe (no tensors, no HTML: followers escape)."""
        tok, trace, choices = self.trace.tokenizer, self.trace, self.choices()
        state = {
            "run_id": self.run_id,
            "step": trace.next_index,
            "seed": trace.seed,
            "settings": knobs(self.settings),
            "prompt": readable_tokens(tok, trace.prompt_ids),
            "generated": readable_tokens(tok, trace.generated_ids),
            "choices": choices,
            "options": options_for_guessing(choices, zlib.crc32(f"{self.run_id}:{trace.next_index}".encode())),
            "finished": trace.finished,
            "guess_open": self.guess_step is not None,
            "reveal": self.last_reveal,
            "model": self.model_name,
            "text": tok.decode(trace.all_ids, skip_special_tokens=True),
            "distribution": distribution_of(trace.peek()),
        }
        steps = [[r.token_id, r.seed, knobs(r.settings)] for r in trace.records]
        checkpoint = dict(model=self.model_name, prompt_ids=list(trace.prompt_ids), max_new_tokens=trace.max_new_tokens,
                          seed=trace.seed, steps=steps, settings=knobs(self.settings), run_id=self.run_id,
                          guess_step=self.guess_step, guessed_choices=self.guessed_choices,
                          last_reveal=self.last_reveal)  # fmt: skip
        return self.store.publish(self.code, self.secret, state, checkpoint)

    @classmethod
    def take_up(cls, store: ClassStore, teacher_key: str | None, model, tokenizer, model_name: str):
        """The run of the class this browser key started, rebuilt on `model` from its checkpoint; None if none."""
        found = store.taught_by(teacher_key) if teacher_key else None
        if found is None or found[1] is None:
            return None
        code, saved = found
        if saved["model"] != model_name:
            raise ClassError(
                f"This browser teaches class {code} on {saved['model']}: pick {saved['model']} in the sidebar to "
                "take the class up again."
            )
        trace = new_trace(model, tokenizer, saved["prompt_ids"], saved["max_new_tokens"])
        for index, (token_id, seed, settings) in enumerate(saved["steps"]):
            record = trace.step(SamplingSettings(**settings), seed=seed)
            if record is None or record.token_id != token_id:
                raise ClassError(
                    f"Class {code} cannot be taken up on this server: its model drew another token at step "
                    f"{index + 1} from the same seed. Start a new class."
                )
        trace.seed = saved["seed"]
        run = cls(
            store, code, teacher_key, trace, saved["model"], SamplingSettings(**saved["settings"]), saved["run_id"]
        )
        run.guess_step, run.guessed_choices = saved["guess_step"], saved["guessed_choices"]
        run.last_reveal = saved["last_reveal"]
        return run

    # -- the teacher's actions -------------------------------------------------------------------------------------
    def change_settings(self, settings: SamplingSettings) -> None:
        """Temperature or top-p moved: the same logits (no forward pass), a new distribution on every screen."""
        if settings != self.settings:
            self.settings = settings
            self.publish()

    def open_guessing(self) -> str:
        self.guess_step = f"{self.run_id}:{self.trace.next_index}:{self.trace.seed}"  # another seed: another round
        self.guessed_choices, self.last_reveal = self.choices(), None
        self.store.open_guess(self.code, self.secret, self.guess_step)
        self.publish()
        return self.guess_step

    def answers_so_far(self) -> int:
        return self.store.tally(self.code, self.guess_step).answers if self.guess_step else 0

    def step(self, seed: int | None = None, redrawn_round: str | None = None):
        """Draw the next token and reveal it beside the answers of the open round (or of `redrawn_round`)."""
        if self.trace.finished:
            return None
        choices = self.guessed_choices or self.choices()
        record = self.trace.step(self.settings, seed=seed)
        tally_step = self.guess_step or redrawn_round
        if self.guess_step is not None:
            self.store.open_guess(self.code, self.secret, None)  # closed: late answers are refused
        tally = self.store.tally(self.code, tally_step) if tally_step is not None else None
        label = readable_token(self.trace.tokenizer, record.token_id)
        self.last_reveal = reveal(tally, choices, record, label) | {"round": tally_step, "choices": choices}
        self.guess_step = self.guessed_choices = None
        self.publish()
        return record

    def same_step_another_seed(self):
        """The last draw again with the next seed: the same distribution, another u; the round's answers stay."""
        if not self.trace.records:
            return None
        previous = self.last_reveal or {}
        self.trace.back()
        self.guessed_choices = previous.get("choices")
        return self.step(seed=self.trace.seed + 1, redrawn_round=previous.get("round"))

    def back(self) -> None:
        if self.trace.records:
            self.trace.back()
            self.last_reveal = self.guess_step = None
            self.store.open_guess(self.code, self.secret, None)
            self.publish()
