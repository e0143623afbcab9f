"""Serve many's side-by-side section: one seeded trace on llama.cpp's llama-server and on vLLM, both started here."""

from __future__ import annotations

import streamlit as st

from app_pages.shared import layout
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from inference.engines.client import LLAMACPP, VLLM
from inference.lessons.serving import experiments, two_engines
from inference.lessons.serving.figures import comparison_figure, engine_state_figure, gantt_figure
from inference.lessons.serving.request_trace import Trace
from inference.lessons.serving.stats import SLO


def section(model_key: str, trace: Trace, slots: int, slo: SLO, presenter: bool) -> None:
    """The engine picker, the replay button, and the two runs side by side with what each scheduler did."""
    st.subheader("Two engines, one trace: llama.cpp and vLLM")
    st.markdown(
        "The same requests at the same arrival times, sent to llama.cpp's `llama-server` and to **vLLM**, each "
        f"allowed {slots} requests in a batch. llama.cpp keeps {slots} fixed *slots* over a KV cache reserved at "
        f"start ({slots} × the model's context); vLLM batches continuously and pages its KV cache in blocks "
        "handed out as requests grow."
    )
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
            experiments.model_on_engine(model_key), trace, slots, runnable, progress
        ),
        not_yet="Nobody has replayed this trace on these engines yet: press the button (vLLM starts its own server "
        "first, the longest part of the wait; the progress bar says when it is serving).",
        background=True,
    )
    if not runs:
        return
    chart(comparison_figure({e: r.result.summary(slo) for e, r in runs.items()}, presenter), width="stretch")
    if LLAMACPP in runs and VLLM in runs:
        weights = experiments.weight_file(model_key).stat().st_size
        st.markdown(two_engines.verdict(runs, weights, slo))
    st.dataframe(two_engines.scheduler_table(runs), width="stretch")
    caption(
        "measured",
        "Read from each engine's own `/metrics` before and after the replay (llama.cpp: `n_decode_total`, "
        "`tokens_predicted_total`, `prompt_tokens_total`; vLLM: `iteration_tokens_total`, "
        "`generation_tokens_total`, `num_preemptions_total`, `cache_config_info`), and its `/slots` or gauges "
        "polled every 0.1 s. Each engine places its compute by its own default (llama-server: its thread "
        "count; vLLM: `VLLM_CPU_OMP_THREADS_BIND=auto`, which may keep a core for its API server): the row "
        "*Compute on* says what each one's log reported.",
    )
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
    caption(
        "measured",
        "One run per engine, one after the other on the same shared CPU; each token timestamped as it arrived. "
        "vLLM reports no per-request prefill time over its streaming API, so its bars do not split waiting from "
        "prefill.",
    )
