"""Every chart on every page goes through `chart`: Plotly's chart, then the same chart as one sentence of text
(inference/lessons/chart_text.py) for a screen reader and for anyone who prefers to read the numbers."""

from __future__ import annotations

import html

import streamlit as st

from inference.lessons.chart_text import describe


def chart(fig, *, key: str | None = None, width: str = "stretch", text: str | None = None, **kwargs) -> None:
    """`st.plotly_chart(fig)` followed by its text: `text` when the page has a better sentence, else `describe(fig)`."""
    st.plotly_chart(fig, width=width, key=key, **kwargs)
    sentence = text if text is not None else describe(fig)
    st.markdown(f'<p class="chart-text">As text: {html.escape(sentence)}</p>', unsafe_allow_html=True)
