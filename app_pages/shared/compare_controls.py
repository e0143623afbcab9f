"""Same luck's prompt and settings widgets, in presenter mode's folded layout or normal mode's (not a page itself).
Every value lives in the session (persist_state), where the page reads it whether these widgets ran or not."""

from __future__ import annotations

import streamlit as st

from app_pages.shared import layout
from app_pages.shared import sampler_controls as controls
from inference.core.run import SEED_MAX
from inference.lessons.compare.text import TEXT
from inference.lessons.generate.text import knobs_now

SIDES = ("A", "B")
PREFIX = {"A": "cmp_a", "B": "cmp_b"}


def seed_and_length(c1, c2, max_new_tokens: int) -> None:
    c1.number_input("Seed (shared)", 0, SEED_MAX, step=1, key="cmp_seed", persist_state="session")
    c2.number_input("Max new tokens", 1, max_new_tokens, step=10, key="cmp_max_new", persist_state="session")


def side_settings(side: str, model_choices: list[str]) -> None:
    """One side's model and sampling knobs."""
    st.subheader(f"Settings {side}")
    st.selectbox(
        "Model",
        model_choices,
        key=f"cmp_model_{side}",
        persist_state="session",
        help="A bfloat16/int8/int4 copy of this model, or another bundled model with the same vocabulary.",
    )
    controls.classic_controls(PREFIX[side], columns=2)  # two a row: labels stay whole in a half-width column
    controls.more_controls(PREFIX[side], columns=2)


def draw(model_choices: list[str], has_template: bool, max_new_tokens: int):
    """The prompt and both sides' settings: (whether the prompt goes into the chat template, the empty line under
    presenter mode's folded settings or None where they are in view)."""
    presenter = layout.presenter()
    for side in SIDES:
        if st.session_state.get(f"cmp_model_{side}") not in model_choices:
            st.session_state[f"cmp_model_{side}"] = model_choices[0]
    top = st.container() if presenter else st.columns([3, 1, 1])
    prompt_box = top if presenter else top[0]
    prompt_box.text_input(  # presenter mode: its label for screen readers only (the intro names it), as Generate's
        "Prompt",
        key="cmp_prompt",
        persist_state="session",
        max_chars=2000,
        label_visibility="collapsed" if presenter else "visible",
    )
    chat = has_template and prompt_box.checkbox(
        "Wrap in the model's chat template", key="cmp_chat", persist_state="session"
    )
    if not presenter:
        seed_and_length(top[1], top[2], max_new_tokens)
        for side, column in zip(SIDES, st.columns(2)):
            with column:
                side_settings(side, model_choices)
        return chat, None
    # Folded, as Generate's are: A above B (side by side at 800 px broke "Temp / eratur / e") took two screens before
    # the two texts, the page's first result.
    box, now_line = layout.folded_settings(TEXT["settings_label"], "cmp_settings_open")
    if box is not None:
        with box:
            seed_and_length(*st.columns(2), max_new_tokens)
            for side in SIDES:
                side_settings(side, model_choices)
    return chat, now_line


def name_settings(now_line, chat: bool, settings: dict) -> None:
    """Presenter mode's lines under the folded settings: what both runs share, each side's model and knobs."""
    state = st.session_state
    lines = [TEXT["now"].format(chat="in the chat template · " * chat, seed=state.cmp_seed, max_new=state.cmp_max_new)]
    for side in SIDES:
        knobs = " · ".join(knobs_now(settings[side]))
        lines.append(TEXT["now_side"].format(side=side, model=state[f"cmp_model_{side}"], knobs=knobs))
    now_line.caption("  \n".join(lines))
