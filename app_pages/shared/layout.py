"""Presenter mode, and the column helpers that follow it (projector-sized text needs wider cells)."""

from __future__ import annotations

import streamlit as st

from inference.lessons.style import TEXT_GREY

# Larger text and charts for a projector; the sidebar's page links stay small so every section fits. A slider's
# value is lifted above its track (at the larger size it sat on the track) and the slider gets the room for it.
# The page starts higher and its title is smaller than the larger rem would make them (6rem of padding and a 2.75rem
# title took 330 px of a 900 px screen before the lesson's first word): the first screen shows the lesson.
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


# Captions, status lines, chart texts and the keys line: Streamlit draws a caption as dark text at opacity 0.6
# (#828180 on white, 3.9:1), below WCAG's 4.5:1 for small text; style.TEXT_GREY at full opacity is 6.2:1 on white
# and 5.5:1 on the sidebar's #f0f2f6 (tests/test_axe_browser.py).
CAPTION_GREY = TEXT_GREY

# Charts side by side (a row of columns holding a Plotly chart) wrap onto rows of their own where the page is
# narrower than two readable charts: at 800 px with the sidebar open the main area is ~450 px, and two 220 px
# charts cut their titles and value labels. Streamlit's columns stack only below a 640 px window.
# A checkbox's label and a page link's wrap onto more lines where Streamlit would cut them to "…" (in presenter mode
# at 800 px: "Show studen…", "KV cache types, measured: Inside the eng…").
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
    """Presenter mode's one closed section for a page's settings (open, they took a projector's first screen before
    the page's first result): (the section, while it is open, else None; the empty line under it for the page to
    name the settings in, while it is closed, else None). Closed, the widgets inside it do not run; their values
    live on in the session (persist_state), where the page reads them."""
    box = st.expander(label, key=key, on_change="rerun")
    return (box, None) if box.open else (None, st.empty())


def side_by_side(count: int = 2) -> list:
    """Columns for charts: side by side where each gets at least 20rem, else each on a row of its own
    (`LAYOUT_CSS`: at 800 px with the sidebar open); stacked full width in presenter mode, where
    projector-sized text would leave half-width charts no room for their bars."""
    if presenter():
        return [st.container() for _ in range(count)]
    return st.columns(count)


def control_row(count: int) -> list:
    """Cells for a row of sliders that wraps onto more rows where the page is narrow, so that labels break between
    words and never inside one (five equal columns broke "Temperatu / re" at 800 px). A stretching cell of a
    horizontal container is at least 8rem wide in Streamlit 1.67 (flex-basis on its wrapper), and the rem grows with
    presenter mode's text; presenter mode's wider gap also counts, so that four a row at 1280 px (the fifth alone
    below, "Temperature" touching its help icon) become three. Five sliders: one row at 1280 px, 3 + 2 at 800 px;
    in presenter mode 3 + 2 and 2 + 2 + 1."""
    row = st.container(horizontal=True, gap="medium" if presenter() else "small")
    return [row.container() for _ in range(count)]


def metric_cells(count: int, per_row: int = 2) -> list:
    """Cells for metrics, `per_row` a row; one a row in presenter mode, where projector-sized labels were cut to
    "Per inp…" and "Time to first t…" at 800 px (three a row cut "Memory bandwidth, G…")."""
    if presenter():
        return [st.container() for _ in range(count)]
    return [cell for _ in range(-(-count // per_row)) for cell in st.columns(per_row)][:count]
