"""Presenter mode, and the column helpers that follow it (projector-sized text needs wider cells)."""

from __future__ import annotations

import streamlit as st

from inference.lessons.style import TEXT_GREY

# Larger text for a projector; the sidebar's links stay small so every section fits; a slider's value lifted off its
# track; less padding and a smaller title, so the first screen shows the lesson (they took 330 of 900 px).
PRESENTER_CSS = """<style>
            html, body, [data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.35rem !important; }
            [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p { font-size: 2.6rem !important; }
            .token-chip { font-size: 1.6rem !important; }
            .token-chip.in-prompt { font-size: 1rem !important; }
            .token-box { line-height: 1.6 !important; }
            [data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.8rem !important; }
            [data-testid="stSidebarNav"] [data-testid="stMarkdownContainer"] p { font-size: 0.9rem !important; }
            [data-testid="stSidebarNavLink"] [data-testid="stMarkdownContainer"] p { font-size: 0.8rem !important; }
            button .stMarkdownEllipsis, button .stMarkdownEllipsis p {
                white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
                overflow-wrap: normal !important; word-break: normal !important; }
            [data-testid="stSliderThumbValue"] { transform: translateY(-0.75em); }
            [data-testid="stSlider"] > div { padding-top: 0.5em; }
            [data-testid="stMainBlockContainer"] { padding-top: 3rem !important; }
            [data-testid="stMain"] h1 { font-size: 2.1rem !important; }
            </style>"""


# Captions at full opacity in style.TEXT_GREY (Streamlit's 0.6 opacity is 3.9:1 on white, below WCAG's 4.5:1).
CAPTION_GREY = TEXT_GREY

# Charts side by side wrap onto rows of their own where two would not be readable (Streamlit's columns stack only
# below 640 px); checkbox and page-link labels wrap where Streamlit would cut them to "…".
LAYOUT_CSS = """<style>
            [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stPlotlyChart"]) {
                flex-wrap: wrap; }
            [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stPlotlyChart"])
                > [data-testid="stColumn"] { min-width: min(20rem, 100%); }
            [data-testid="stMain"] [data-testid="stCheckbox"] [data-testid="stWidgetLabel"] *,
            [data-testid="stMain"] [data-testid="stPageLink-NavLink"] span {
                white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
            [data-testid="stCaptionContainer"] { color: CAPTION_GREY; opacity: 1; }
            [data-testid="stCaptionContainer"] code { color: CAPTION_GREY; }
            .chart-text { font-size: 0.875rem; color: CAPTION_GREY; margin: -0.6rem 0 0.4rem 0; }
            .keys-hint { font-size: 0.875rem; color: CAPTION_GREY; margin: 0; }
            </style>""".replace("CAPTION_GREY", CAPTION_GREY)


def presenter() -> bool:
    return bool(st.session_state.get("presenter", False))


def folded_settings(label: str, key: str):
    """Presenter mode's one closed section for a page's settings (open, they filled a projector's first screen):
    (the section while open, else None; while closed, an empty line under it for the page to name the settings in).
    Closed, its widgets do not run; their values live on in the session (persist_state)."""
    box = st.expander(label, key=key, on_change="rerun")
    return (box, None) if box.open else (None, st.empty())


def side_by_side(count: int = 2) -> list:
    """Columns for charts (wrapping where each would get less than 20rem, LAYOUT_CSS); stacked in presenter mode,
    where projector-sized text leaves half-width charts no room for their bars."""
    return [st.container() for _ in range(count)] if presenter() else st.columns(count)


def control_row(count: int) -> list:
    """Cells for a row of sliders that wraps onto more rows where the page is narrow, so labels break between words
    ("Temperatu / re" in five equal columns at 800 px); presenter mode's wider gap makes four a row three."""
    row = st.container(horizontal=True, gap="medium" if presenter() else "small")
    return [row.container() for _ in range(count)]


def metric_cells(count: int, per_row: int = 2) -> list:
    """Cells for metrics, `per_row` a row; one a row in presenter mode (projector-sized labels were cut)."""
    if presenter():
        return [st.container() for _ in range(count)]
    return [cell for _ in range(-(-count // per_row)) for cell in st.columns(per_row)][:count]
