"""The one line under every chart and table, in the project's one vocabulary for how a number was obtained; and
the step summary line of the pages that show a sampling step."""

import streamlit as st

CAPTION_KINDS = {
    "measured": "📏 Measured",  # timed or read on this machine
    "exact": "🧮 Computed exactly",  # deterministic arithmetic on the model's outputs
    "simulated": "🎲 Simulated",  # random draws
    "published": "📚 Published",  # public configs and reports
    "illustrative": "🎨 Illustrative",  # made-up numbers for a picture
}


def caption(kind: str, text: str) -> None:
    if kind not in CAPTION_KINDS:
        raise ValueError(f"caption kind must be one of {sorted(CAPTION_KINDS)}, got {kind!r}")
    st.caption(f"**{CAPTION_KINDS[kind]}.** {text}")


def view_summary(view) -> None:
    st.markdown(summary_line(view))  # one readable line: metrics would truncate the numbers


def summary_line(view) -> str:
    nucleus = view.nucleus_size
    parts = [  # (a one-token distribution's entropy rounds to a tiny negative: shown as 0.00)
        f"**Entropy** {max(view.entropy_raw_bits, 0.0):.2f} → {max(view.entropy_final_bits, 0.0):.2f} bits",
        f"**Kept** {view.kept[view.final_stage]:,} of {len(view.order):,} tokens",
        f"**Nucleus** {nucleus:,} {'token' if nucleus == 1 else 'tokens'} holding {view.nucleus_mass:.1%}",
    ]
    if view.settings.greedy:
        parts.append("**Draw** greedy: always the top token")
    elif view.u is not None:
        parts.append(f"**Draw** u = {view.u:.3f} lands on rank {view.chosen_rank + 1:,}")
    return " &nbsp;·&nbsp; ".join(parts)
