"""Inference Lab: how a language model writes, one token at a time.

    streamlit run app.py

Every page is listed here. Each page starts with `common.current_model()`, which also draws
the shared sidebar (model picker, presenter toggle).
"""
import streamlit as st

from pages.common import use_app_navigation

use_app_navigation()
st.set_page_config(page_title="Inference Lab", page_icon="🔬", layout="wide")

PAGES = [
    st.Page("pages/generate.py", title="Generate", icon="✍️", default=True),
    st.Page("pages/sampling_lab.py", title="Sampling lab", icon="🎲", url_path="sampling"),
    st.Page("pages/prefill_decode.py", title="Prefill vs decode", icon="⏱️", url_path="prefill-decode"),
    st.Page("pages/kv_cache.py", title="KV cache", icon="🗄️", url_path="kv-cache"),
    st.Page("pages/quantization.py", title="Quantization", icon="🗜️", url_path="quantization"),
]

st.navigation(PAGES).run()
