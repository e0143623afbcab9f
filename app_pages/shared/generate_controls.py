"""Generate's prompt and settings widgets, in presenter mode's folded layout or normal mode's (not a page itself)."""

from __future__ import annotations

import streamlit as st

from app_pages.shared import layout
from app_pages.shared import sampler_controls as controls
from inference.core.run import SEED_MAX
from inference.lessons.generate.text import TEXT


def prompt_box() -> None:
    """The prompt; in presenter mode two lines high, its label read aloud by a screen reader but not drawn (the text
    above names it): Streamlit's least height for a box with a drawn label is 96 px, without 68."""
    compact = layout.presenter()
    st.text_area(
        "Prompt",
        key="gen_prompt",
        persist_state="session",
        height=68 if compact else 100,
        max_chars=20_000,
        label_visibility="collapsed" if compact else "visible",
    )


def chat_control(has_template: bool) -> bool:
    """The chat template's checkbox, where the model has a template; whether the prompt goes into it."""
    if has_template:
        return st.checkbox("Wrap in the model's chat template", key="gen_chat", persist_state="session")
    return False


def seed_and_length(c1, c2, max_new_tokens: int) -> None:
    c1.number_input(
        "Seed",
        min_value=0,
        max_value=SEED_MAX,
        step=1,
        key="gen_seed",
        persist_state="session",
        help=TEXT["seed_help"],
    )
    c2.number_input(
        "Max new tokens",
        min_value=1,
        max_value=max_new_tokens,
        step=10,
        key="gen_max_new",
        persist_state="session",
        help=f"Capped at {max_new_tokens} on this server.",
    )


# Presenter mode: the prompt, then the settings (the chat template's too) folded into one closed section with a line
# under it naming every setting that acts on the draw: open, they took 600 px of a 900 px projector screen, and Step
# and the text came below it (at 800 px side by side, seed's and max tokens' labels broke mid-word: "See / d").
# Closed, its widgets do not run; their values live on in the session (persist_state), where the page reads them.
def draw(has_template: bool, max_new_tokens: int):
    """Generate's prompt and settings, in presenter mode's or normal mode's layout: whether the prompt goes into
    the chat template, and the empty line under the folded settings (None where the settings are in view)."""
    settings_line = None
    if layout.presenter():
        prompt_box()
        settings_box, settings_line = layout.folded_settings(TEXT["settings_label"], "gen_settings_open")
        chat = has_template and bool(st.session_state.get("gen_chat"))
        if settings_box is not None:
            with settings_box:
                chat = chat_control(has_template)
                seed_and_length(*st.columns(2), max_new_tokens)
                controls.classic_controls("gen", cells=layout.control_row(len(controls.CLASSIC)))
                controls.more_controls("gen", inline=True)
    else:
        left, right = st.columns([3, 2])
        with left:
            prompt_box()
            chat = chat_control(has_template)
        with right:
            seed_and_length(*st.columns(2), max_new_tokens)
        controls.classic_controls("gen", cells=layout.control_row(len(controls.CLASSIC)))
        controls.more_controls("gen")
    return chat, settings_line
