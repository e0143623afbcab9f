"""Serve many's side-by-side section: one seeded trace on llama.cpp's llama-server and on vLLM, both started here."""

from __future__ import annotations

import streamlit as st

from app_pages.shared import layout
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from inference.engines.client import LLAMACPP, VLLM
from inference.lessons.serving import models, two_engines
from inference.lessons.serving.figures import comparison_figure, engine_state_figure, gantt_figure
from inference.lessons.serving.replay import SLO
from inference.lessons.serving.request_trace import Trace
from inference.lessons.serving.text import TEXT, engines_verdict


def section(model_key: str, trace: Trace, slots: int, slo: SLO, presenter: bool) -> None:
    """The engine picker, the replay button, and the two runs side by side with what each scheduler did."""
    st.subheader("Two engines, one trace: llama.cpp and vLLM")
    st.markdown(TEXT["pair_intro"].format(slots=slots))
    missing = two_engines.available()
    picked = st.multiselect(
        "Engines",
        list(two_engines.ENGINES),
        default=[e for e in two_engines.ENGINES if e not in missing],
        key="serving_pair_engines",
        persist_state="session",
    )
    for engine in picked:
        if engine in missing:
            st.info(missing[engine])
    runnable = [e for e in picked if e not in missing]
    if not runnable:
        return
    runs = measure_on_click(
        f"Replay the trace on {' and '.join(runnable)}",
        key="serving_pair",
        result_key=("serving-pair", model_key, trace.key, slots, tuple(runnable)),
        measure=lambda progress: two_engines.replay_on_engines(
            models.model_on_engine(model_key), trace, slots, runnable, progress
        ),
        not_yet=TEXT["pair_not_yet"],
        background=True,
    )
    if not runs:
        return
    chart(comparison_figure({e: r.result.summary(slo) for e, r in runs.items()}, presenter), width="stretch")
    if LLAMACPP in runs and VLLM in runs:
        weights = models.weight_file(model_key).stat().st_size
        facts = {engine: two_engines.scheduler_facts(run) for engine, run in runs.items()}
        st.markdown(engines_verdict(runs, facts, weights, slo))
    st.dataframe(two_engines.scheduler_table(runs), width="stretch")
    caption("measured", TEXT["pair_facts"])
    longest = max(r.result.wall_s for r in runs.values())
    for column, (engine, run) in zip(layout.side_by_side(len(runs)), runs.items()):
        with column:
            chart(gantt_figure(run.result.table(), f"Each request, {engine}", presenter, longest), width="stretch")
            chart(
                engine_state_figure(two_engines.states_in_tokens(run), f"Inside {engine}", presenter, longest),
                width="stretch",
            )
            failed = [r for r in run.result.records if r.error]
            if failed:
                st.warning(f"{len(failed)} request(s) failed on {engine}: {failed[0].error}")
    caption("measured", TEXT["pair_gantt"])
