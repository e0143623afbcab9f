"""The Stepper of a page that steps a run (Generate, Speculative, MoE, Constrained): settings from a shared link, one
run per run key in the session, the Step / Play / Back / Reset row, the status line and the URL mirror. A serving
engine's failure shows its sentence and ends Play; the run so far stays."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from app_pages.shared import keys
from app_pages.shared.slots import engine_errors, generation_slot
from app_pages.shared.url_state import read_url_once
from inference.core import measuring
from inference.lessons.generate.text import TEXT

REPLAY_PARAM = "n"  # the URL parameter holding how many steps a shared link replays

PAINT_EVERY_S = 0.1  # Play repaints at most this often: on llama-server a paint cost more than a step


def play(run, step: Callable[[], object], show: Callable[[], None], stop_key: str, stop_help: str) -> None:
    """Step `run` to its end, one generation slot a step so others get turns, painting at most every
    `PAINT_EVERY_S`; Stop (its click reruns the page at the next paint) or an engine's failure ends it."""
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
        """True once a session, for its first empty run (not a shared link's): it opens with a step taken."""
        state = st.session_state if state is None else state
        opened = f"{self.prefix}_opened"
        if run is None or self.steps_done(run) or state.get(opened) or state.get(self.replay_key):
            return False
        state[opened] = True
        return True

    def read_url(
        self, url_params: dict, defaults: dict, ranges: dict, names=None, choices=None, replay_max: int = 10_000
    ) -> list[str]:
        return read_url_once(
            f"{self.prefix}_url_read",
            {**url_params, REPLAY_PARAM: (self.replay_key, int)},
            {**defaults, self.replay_key: 0},
            {**ranges, self.replay_key: (0, replay_max)},
            names=names,
            choices=choices,
        )

    def buttons(self, reveal: bool = True) -> None:
        """The Step / Play / (Back) / Reset row in one horizontal container (a column each is more messages a Step),
        and its keys (`keys.bind`; `reveal`: a key scrolls the row into view first)."""
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
        """The session's run, or a new one from `start()` on Reset or a new run key; with `can_start` False or
        `start()` None the last run stays."""
        run = st.session_state.get(self.run_state)
        fresh = run is None or self.clicked.get("reset") or st.session_state.get(f"{self.prefix}_run_key") != run_key
        if can_start and fresh:
            started = start()
            if started is not None:
                st.session_state[self.run_state], st.session_state[f"{self.prefix}_run_key"] = started, run_key
                run = started
        return run

    def advance(self, run, step: Callable[[], object], replay: Callable[[int], object] | None = None, step_now=0):
        """Back, then Step (or `step_now` steps), then a shared link's replay of its `n` steps on an empty run."""
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

    @staticmethod
    def status_text(run, lead: str, next_hint: str, chooser: str = "the model") -> str:
        """`lead` (what the run holds), then why it stopped or what comes next."""
        numbers = {"chooser": chooser, "max_new": run.max_new_tokens, "context": run.context}
        done = TEXT[run.stop_reason].format(**numbers) if run.finished else next_hint
        return f"{lead} · {done}"

    def mirror_url(self, run, settings: dict[str, str], extra: dict[str, str] | None = None) -> None:
        st.query_params.from_dict(
            {**settings, REPLAY_PARAM: str(self.steps_done(run) if run is not None else 0), **(extra or {})}
        )
