"""Inference Lab: how a language model writes, one token at a time.

    streamlit run app.py

Every page is listed here. Each page file is named after its URL path (pages/kv-cache.py is
/kv-cache), so the page Streamlit picks on a fresh server's first run is the same page
`st.navigation` picks. Each page starts with `common.current_model()`, which also draws the
shared sidebar (model picker, presenter toggle).
"""
import streamlit as st
import torch

from inference.limits import Limits

st.set_page_config(page_title="Inference Lab", page_icon="🔬", layout="wide")
torch.set_num_threads(Limits.from_env().torch_threads)  # why one: see Limits.torch_threads

PAGES = [
    st.Page("pages/generate.py", title="Generate", icon="✍️", default=True),
    st.Page("pages/sampling.py", title="Sampling lab", icon="🎲", url_path="sampling"),
    st.Page("pages/prefill-decode.py", title="Prefill vs decode", icon="⏱️", url_path="prefill-decode"),
    st.Page("pages/kv-cache.py", title="KV cache", icon="🗄️", url_path="kv-cache"),
    st.Page("pages/quantization.py", title="Quantization", icon="🗜️", url_path="quantization"),
    st.Page("pages/cost.py", title="Cost & MoE", icon="💰", url_path="cost"),
]

st.navigation(PAGES).run()
