"""The Stepper of a page that steps a run (Generate, Speculative, MoE): its settings from a shared link, one run per
run key, the Step / Play / Back / Reset row (Play with Stop), the status line and the URL mirror.

A page draws the row where it wants it, then hands the Stepper its run key, how to start a run and how to take one
step; the run lives in `st.session_state` under the page's key. A serving engine's failure shows its sentence and
ends Play; the run so far stays."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from app_pages.shared import keys
from app_pages.shared.slots import engine_errors, generation_slot
from app_pages.shared.url_state import read_url_once
from inference.core import measuring
from inference.lessons.generate.text import stop_sentence

REPLAY_PARAM = "n"  # the URL parameter holding how many steps a shared link replays


# Play repaints the text at most this often: a paint rebuilds every chip and sends it to the browser, which cost
# more than a step itself once the model ran on llama-server (a 40 ms step painted at 13 tokens/s, measured).
PAINT_EVERY_S = 0.1


def play(run, step: Callable[[], object], show: Callable[[], None], stop_key: str, stop_help: str) -> None:
    """Step `run` to its end, one step per generation slot so other visitors get turns, `show`ing the text at most
    every `PAINT_EVERY_S` and once at the end. A Stop button ends it (its click reruns the page at the next
    Streamlit call, a paint), and so does a serving engine's failure (its sentence is shown); what was generated
    stays."""
    stop_box = st.empty()
    stop_box.button("Stop", key=stop_key, help=stop_help)
    painted = -math.inf  # the first step paints
    while not run.finished:
        failed = True
        with generation_slot(), engine_errors():
            step()
            failed = False
        if failed:
            break
        if measuring.ms_since(painted) >= PAINT_EVERY_S * 1000:
            show()
            painted = measuring.now()
    show()
    stop_box.empty()


@dataclass
class Stepper:
    """One page's run controls. Widget keys are `{prefix}_step`, `_play`, `_back`, `_reset`, `_stop`."""

    prefix: str
    run_state: str  # session key holding the run
    steps_done: Callable[[object], int]  # steps (or rounds) the run has made: the URL's `n`
    unit: str = "token"  # what one step makes, for Stop's help
    step_label: str = "Step"
    with_back: bool = False
    clicked: dict[str, bool] = field(default_factory=dict)

    @property
    def replay_key(self) -> str:
        return f"{self.prefix}_steps_in_url"

    def opens_with_a_step(self, run, state=None) -> bool:
        """True once a session: its first run takes its first step on page load, so a teacher sees one without
        pressing anything (#46 item 11). Not on a shared link that replays its own steps, nor on a run that has
        steps; later runs (Reset, a new prompt) start empty. Marks the session (`state`: st.session_state)."""
        state = st.session_state if state is None else state
        opened = f"{self.prefix}_opened"
        if run is None or self.steps_done(run) or state.get(opened) or state.get(self.replay_key):
            return False
        state[opened] = True
        return True

    def read_url(
        self, url_params: dict, defaults: dict, ranges: dict, names=None, choices=None, replay_max: int = 10_000
    ) -> list[str]:
        """The page's settings from a shared link, once per session, plus how many steps it replays (`n`)."""
        return read_url_once(
            f"{self.prefix}_url_read",
            {**url_params, REPLAY_PARAM: (self.replay_key, int)},
            {**defaults, self.replay_key: 0},
            {**ranges, self.replay_key: (0, replay_max)},
            names=names,
            choices=choices,
        )

    def buttons(self, reveal: bool = True) -> None:
        """The Step / Play / (Back) / Reset row, full width so the labels stay whole on narrow screens, and under it
        the keys line (→ / PageDown Step, ← / PageUp Back, P Play or Stop: app_pages/shared/keys.py). One horizontal
        container, not a column each: a Step redraws this row, and each column is one more message. `reveal`: a key
        pressed while the row is off the screen scrolls it into view first (`keys.bind`)."""
        names = ["step", "play"] + (["back"] if self.with_back else []) + ["reset"]
        labels = {"step": self.step_label, "play": "Play", "back": "Back", "reset": "Reset"}
        row = st.container(horizontal=True)
        for name in names:
            self.clicked[name] = row.button(
                labels[name],
                key=f"{self.prefix}_{name}",
                type="primary" if name == "step" else "secondary",
                width="stretch",
            )
        keys.bind(
            f"{self.prefix}_step",
            back=f"{self.prefix}_back" if self.with_back else None,
            play=f"{self.prefix}_play",
            stop=f"{self.prefix}_stop",
            reveal=reveal,
        )

    def current_run(self, run_key, start: Callable[[], object | None], can_start: bool = True):
        """The session's run, or a new one from `start()` when there is none, Reset was pressed or the run key
        changed. With `can_start` False (bad input, its message shown) or `start()` returning None the last run
        stays, so nothing on the page is lost."""
        run = st.session_state.get(self.run_state)
        fresh = run is None or self.clicked.get("reset") or st.session_state.get(f"{self.prefix}_run_key") != run_key
        if can_start and fresh:
            started = start()
            if started is not None:
                st.session_state[self.run_state], st.session_state[f"{self.prefix}_run_key"] = started, run_key
                run = started
        return run

    def advance(self, run, step: Callable[[], object], replay: Callable[[int], object] | None = None, step_now=0):
        """Back, then Step (or `step_now` steps: a run that opens with a step), then a shared link's replay of its
        `n` steps on a run that has none, in this session's generation slot."""
        with generation_slot(), engine_errors():
            if self.clicked.get("back"):
                run.back()
            for _ in range(int(step_now) or int(bool(self.clicked.get("step")))):
                step()
            wanted = int(st.session_state.get(self.replay_key, 0))
            if replay is not None and wanted and not self.steps_done(run):
                replay(wanted)  # a shared link replays its steps once, so it shows the same tokens
                st.session_state[self.replay_key] = 0

    def play_if_clicked(self, run, step: Callable[[], object], show: Callable[[], None]) -> None:
        if self.clicked.get("play"):
            play(
                run,
                step,
                show,
                f"{self.prefix}_stop",
                f"Stops after the current {self.unit}; what was generated stays.",
            )

    def status_line(self, run, lead: str, next_hint: str, chooser: str = "the model") -> None:
        """`lead` (what the run holds), then why it stopped or what comes next."""
        st.caption(self.status_text(run, lead, next_hint, chooser))

    @staticmethod
    def status_text(run, lead: str, next_hint: str, chooser: str = "the model") -> str:
        """`status_line`'s sentence, for a page that shows it inside an element of its own."""
        done = stop_sentence(run.stop_reason, run.max_new_tokens, run.context, chooser) if run.finished else next_hint
        return f"{lead} · {done}"

    def mirror_url(self, run, settings: dict[str, str], extra: dict[str, str] | None = None) -> None:
        """The URL mirrors the current settings and the steps made: copy it to share this run."""
        st.query_params.from_dict(
            {**settings, REPLAY_PARAM: str(self.steps_done(run) if run is not None else 0), **(extra or {})}
        )
