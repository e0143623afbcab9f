"""The teacher's side of a class: the run on the real model, and what it publishes after every change.

`TeacherRun` wraps a generation `Trace`; every action (a setting moved, guessing opened, Step, the same step
with another seed, Back) ends by publishing the state followers draw. Only the store checks who may publish,
with the teacher's secret, so this class holds no authority of its own.

Failover: every publish also stores a small JSON checkpoint (never sent to followers): the prompt's ids and, per
step, the token drawn with its seed and the settings that differ from the defaults, plus the open round. When the
teacher's app host dies, the teacher's browser reconnected to another host takes the class up (`take_up`) by
replaying those steps on that host's copy of the model (same model, settings and seeds: same tokens; a token that
differs stops it with a sentence). Who may: the browser that started it, by its sticky cookie (`BROWSER_COOKIE`,
set HttpOnly by deploy/nginx.conf), whose SHA-256 the class stores as a second teacher credential. Students'
guesses and membership are in the store and stay counted.
"""

from __future__ import annotations

import secrets
import zlib
from dataclasses import asdict, dataclass, field, fields

from inference.core.run import Trace, new_trace
from inference.core.tokens import readable_token, readable_tokens
from inference.lessons.classroom import session
from inference.lessons.classroom.store import ClassError, ClassStore
from inference.sampling.pipeline import SamplingSettings

BROWSER_COOKIE = "inference_lab"  # deploy/nginx.conf: `map $cookie_inference_lab ...`
_DEFAULT = SamplingSettings()
_SAVED = [f.name for f in fields(SamplingSettings) if f.init and f.name != "allowed_tokens"]


def settings_dict(settings: SamplingSettings) -> dict:
    """The knobs that differ from the defaults, JSON-safe (a class's run has no format mask)."""
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name in _SAVED
        if (value := getattr(settings, name)) != getattr(_DEFAULT, name)
    }


def settings_from(saved: dict) -> SamplingSettings:
    return SamplingSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})


@dataclass
class TeacherRun:
    store: ClassStore
    code: str
    secret: str
    trace: Trace
    model_name: str
    settings: SamplingSettings
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    guess_step: str | None = None  # the round open for guesses (session.step_key), or None
    guessed_choices: list[dict] | None = None  # the top tokens as they were when guessing opened
    last_reveal: dict | None = None
    published_version: int = 0

    @classmethod
    def start(cls, store, code, secret, model, tokenizer, prompt_ids, max_new_tokens, settings, seed, model_name):
        trace = new_trace(model, tokenizer, prompt_ids, max_new_tokens, seed=seed)
        run = cls(store, code, secret, trace, model_name, settings)
        run.publish()
        return run

    # -- what followers see ---------------------------------------------------------------------
    def choices(self) -> list[dict]:
        logits = self.trace.peek()
        if logits is None:
            return []
        return session.next_choices(logits, self.settings, self.trace.seen_now(), self.trace.tokenizer)

    def text(self) -> str:
        return self.trace.tokenizer.decode(self.trace.all_ids, skip_special_tokens=True)

    def publish(self) -> int:
        """Publish what every follower's screen shows, as JSON-safe values (no tensors, no HTML: followers escape)."""
        tok, trace, choices = self.trace.tokenizer, self.trace, self.choices()
        settings = {k: v for k, v in asdict(self.settings).items() if isinstance(v, (int, float, str, bool))}
        state = {
            "run_id": self.run_id,
            "step": trace.next_index,
            "seed": trace.seed,
            "settings": settings,
            "prompt": readable_tokens(tok, trace.prompt_ids),
            "generated": readable_tokens(tok, trace.generated_ids),
            "choices": choices,
            "options": session.options_for_guessing(choices, zlib.crc32(f"{self.run_id}:{trace.next_index}".encode())),
            "finished": trace.finished,
            "guess_open": self.guess_step is not None,
            "reveal": self.last_reveal,
            "model": self.model_name,
            "text": self.text(),
            "distribution": session.distribution_of(trace.peek()),
        }
        self.published_version = self.store.publish(self.code, self.secret, state, self.checkpoint())
        return self.published_version

    # -- failover (see the module docstring) -------------------------------------------------------
    def checkpoint(self) -> dict:
        trace = self.trace
        return {
            "model": self.model_name,
            "prompt_ids": list(trace.prompt_ids),
            "max_new_tokens": trace.max_new_tokens,
            "seed": trace.seed,
            "steps": [[r.token_id, r.seed, settings_dict(r.settings)] for r in trace.records],
            "settings": settings_dict(self.settings),
            "run_id": self.run_id,
            "guess_step": self.guess_step,
            "guessed_choices": self.guessed_choices,
            "last_reveal": self.last_reveal,
        }

    @classmethod
    def take_up(cls, store: ClassStore, teacher_key: str | None, model, tokenizer, model_name: str):
        """The run of the class this browser key started, rebuilt on `model`; None if it started none."""
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
            record = trace.step(settings_from(settings), seed=seed)
            if record is None or record.token_id != token_id:
                raise ClassError(
                    f"Class {code} cannot be taken up on this server: its model drew another token at step "
                    f"{index + 1} from the same seed. Start a new class."
                )
        trace.seed = saved["seed"]
        run = cls(store, code, teacher_key, trace, saved["model"], settings_from(saved["settings"]), saved["run_id"])
        run.guess_step, run.guessed_choices = saved["guess_step"], saved["guessed_choices"]
        run.last_reveal, run.published_version = saved["last_reveal"], store.info(code).version
        return run

    # -- the teacher's actions -------------------------------------------------------------------
    def change_settings(self, settings: SamplingSettings) -> None:
        """Temperature or top-p moved: the same logits (no forward pass), a new distribution on every screen."""
        if settings != self.settings:
            self.settings = settings
            self.publish()

    def open_guessing(self) -> str:
        self.guess_step = session.step_key(self.run_id, self.trace.next_index, self.trace.seed)
        self.guessed_choices = self.choices()
        self.last_reveal = None
        self.store.open_guess(self.code, self.secret, self.guess_step)
        self.publish()
        return self.guess_step

    def answers_so_far(self) -> int:
        return self.store.tally(self.code, self.guess_step).answers if self.guess_step else 0

    def step(self, seed: int | None = None, redrawn_round: str | None = None):
        """Draw the next token and reveal it; if guessing was open (or `redrawn_round`, the round of a step drawn
        again), close it and show the answers beside the draw. A draw without guessing still has its reveal."""
        if self.trace.finished:
            return None
        choices = self.guessed_choices or self.choices()
        record = self.trace.step(self.settings, seed=seed)
        tally_step = self.guess_step or redrawn_round
        if self.guess_step is not None:
            self.store.open_guess(self.code, self.secret, None)  # closed: late answers are refused
        tally = self.store.tally(self.code, tally_step) if tally_step is not None else None
        label = readable_token(self.trace.tokenizer, record.token_id)
        self.last_reveal = session.reveal(tally, choices, record, label) | {"round": tally_step, "choices": choices}
        self.guess_step = None
        self.guessed_choices = None
        self.publish()
        return record

    def same_step_another_seed(self):
        """Undo the last draw and draw it again with the next seed: the same distribution, another u, maybe
        another token. The class's answers for that step stay and are shown against the new draw."""
        if not self.trace.records:
            return None
        previous = self.last_reveal
        self.trace.back()
        self.guessed_choices = (previous or {}).get("choices")
        return self.step(seed=self.trace.seed + 1, redrawn_round=(previous or {}).get("round"))

    def back(self) -> None:
        if self.trace.records:
            self.trace.back()
            self.last_reveal = None
            self.guess_step = None
            self.store.open_guess(self.code, self.secret, None)
            self.publish()
