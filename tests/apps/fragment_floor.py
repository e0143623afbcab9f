"""Streamlit's own floor for a Step: the page bench's reference app (`page_step_floor_server_cpu_ms` in
`python -m inference.bench --pages`), not a lesson and not a test module.

One fragment with what every page that steps a run draws on a Step and nothing else: the Stepper's four buttons in
one horizontal container, the run's chips (one per Step, in a `.token-box` whose `data-generated-ids` the bench
counts, as on Generate) and the status line. No model and no step view: what a Step costs here is Streamlit's
rerun and its messages, so Generate's figure minus this one is what the lesson itself costs the server.
"""

import html

import streamlit as st

st.title("Streamlit's floor for a Step")
steps = st.session_state.setdefault("floor_steps", [])


@st.fragment
def run_section() -> None:
    row = st.container(horizontal=True)
    clicked = {
        name: row.button(name, key=f"floor_{name.lower()}", type="primary" if name == "Step" else "secondary",
                         width="stretch")
        for name in ("Step", "Play", "Back", "Reset")
    }  # fmt: skip
    if clicked["Step"]:
        steps.append(len(steps))
    chips = "".join(f'<span class="token-chip">{html.escape(f"token {i}")}</span>' for i in steps)
    ids = ",".join(map(str, steps))
    st.markdown(f'<div class="token-box" data-generated-ids="{ids}">{chips}</div>', unsafe_allow_html=True)
    st.caption(f"{len(steps)} steps · next: step {len(steps)}")


run_section()
