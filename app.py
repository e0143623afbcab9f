"""Inference Lab: how a language model writes, one token at a time (`streamlit run app.py`).

Every page is listed here, in sections a class can walk top to bottom, each file named after its URL path
(app_pages/kv-cache.py is /kv-cache; not `pages/`, so `st.navigation` alone decides which page a URL opens).
"""

import streamlit as st
import torch

from inference.core.limits import Limits

# Presenter mode folds the sidebar away (a projector needs the width); one opened or closed by hand stays so.
SIDEBAR_STATE = "collapsed" if st.session_state.get("presenter") else "auto"
st.set_page_config(page_title="Inference Lab", page_icon="🔬", layout="wide", initial_sidebar_state=SIDEBAR_STATE)
torch.set_num_threads(Limits.from_env().torch_threads)  # why one: see Limits.torch_threads

# Section -> pages, in teaching order. An empty section is left out of the sidebar.
SECTIONS = {
    "Start": [
        st.Page("app_pages/start.py", title="Start here", icon="🧭", url_path="start"),
        st.Page(
            "app_pages/training-vs-inference.py",
            title="Training vs inference",
            icon="🏋️",
            url_path="training-vs-inference",
        ),
        st.Page("app_pages/class.py", title="Class mode", icon="🧑‍🏫", url_path="class"),
    ],
    "Watch it write": [
        st.Page("app_pages/generate.py", title="Generate", icon="✍️", default=True),
        st.Page("app_pages/sampling.py", title="Sampling lab", icon="🎲", url_path="sampling"),
        st.Page("app_pages/compare.py", title="Same luck, two settings", icon="⚖️", url_path="compare"),
        st.Page("app_pages/constrained.py", title="Constrained decoding", icon="🧷", url_path="constrained"),
    ],
    "Where the time goes": [
        st.Page("app_pages/prefill-decode.py", title="Prefill vs decode", icon="⏱️", url_path="prefill-decode"),
        st.Page("app_pages/inside.py", title="Inside one pass", icon="🔬", url_path="inside"),
        st.Page("app_pages/kv-cache.py", title="KV cache", icon="🗄️", url_path="kv-cache"),
    ],
    "Make it cheaper": [
        st.Page("app_pages/quantization.py", title="Quantization", icon="🗜️", url_path="quantization"),
        st.Page("app_pages/moe.py", title="Mixture of Experts", icon="🧩", url_path="moe"),
        st.Page("app_pages/speculative.py", title="Speculative decoding", icon="🎯", url_path="speculative"),
        st.Page("app_pages/cost.py", title="Cost", icon="💰", url_path="cost"),
    ],
    "Serve many": [
        st.Page("app_pages/serving.py", title="Serve many", icon="🚦", url_path="serving"),
        st.Page("app_pages/engine-internals.py", title="Inside the engine", icon="🔧", url_path="engine-internals"),
    ],
}

# expanded=True: no page folded behind "View N more" (Start here says to walk them top to bottom).
st.navigation({section: pages for section, pages in SECTIONS.items() if pages}, expanded=True).run()
