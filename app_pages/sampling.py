"""Sampling lab: how each knob reshapes one step's distribution, without rerunning the model."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared import sampler_controls as controls
from app_pages.shared.captions import caption, view_summary
from app_pages.shared.charts import chart
from app_pages.shared.session_memo import kept_until_changed
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import engine_errors, generation_slot
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.remote import is_remote, logits_note
from inference.core.run import new_trace
from inference.core.tokens import readable_tokens
from inference.lessons.generate.figures import cumulative_curve, next_token_bars
from inference.lessons.sampling_lab.figures import (
    TEMPERATURE_GRID,
    TOP_P_GRID,
    draw_band,
    draw_histogram,
    lab_table,
    live_slider_figure,
    pipeline_figure,
    slider_frames,
    temperatures_side_by_side,
)
from inference.lessons.sampling_lab.text import OPENING_SETTINGS, TEXT, top_draw
from inference.sampling.pipeline import STAGE_NAMES, SamplingSettings, StepContext, seen_mask
from inference.sampling.step_view import sample_many, step_view

DRAWS = 1000  # draws of "Sample N times": enough for a ±3-point band on a 30% token

loaded = current_model(remote_ok=True)
remote = is_remote(loaded)
tokenizer = loaded.tokenizer
presenter = layout.presenter()

st.title("🎲 Sampling lab")
st.markdown(TEXT["intro"])

trace = st.session_state.get("gen_trace")
sources = ["A prompt typed here"] + (
    ["The current step on Generate"] if trace is not None and trace.model is loaded.model else []
)
# The choice only once there is one: a radio of one option took a projector's first screen for nothing.
source = sources[0]
if len(sources) > 1:
    source = st.radio(
        "Logits from", sources, index=len(sources) - 1, horizontal=True, key="lab_source", persist_state="session"
    )
if source == "The current step on Generate":
    context_ids, logits = (trace.all_ids[:-1], trace.records[-1].logits) if trace.finished else (trace.all_ids, None)
    if logits is None:
        with generation_slot(), engine_errors():
            logits = trace.peek()
        if logits is None:
            st.stop()  # a serving engine failed: its message is shown
    seen = seen_mask(context_ids, trace.vocab_size)
else:
    opening = opening_prompt("sampling", loaded.info.name).text
    # presenter mode: its label for screen readers only (the intro names it), so the first chart reaches the screen
    shown = "collapsed" if presenter else "visible"
    text = st.text_input("Prompt", opening, key="lab_prompt", persist_state="session", label_visibility=shown)
    prepared = prepare_prompt(tokenizer, text, False, loaded.info.context, models.limits())
    for note in prepared.notes:
        st.info(note)
    if prepared.error:
        st.warning(prepared.error)
        st.stop()
    cache = st.session_state.setdefault("lab_logits", {})
    key = (loaded.info.name, tuple(prepared.ids))
    if key not in cache:
        with generation_slot(), engine_errors():
            cache.clear()  # one prompt's logits per session is all the page needs
            cache[key] = new_trace(loaded.model, tokenizer, prepared.ids, 1).peek()
        if key not in cache:
            st.stop()  # a serving engine failed: its message is shown
    logits, context_ids = cache[key], prepared.ids
    seen = seen_mask(prepared.ids, len(logits))

# Every chart below is drawn from this step's distribution: exact only when the engine returned all of it
exact = True
if remote:
    note_kind, engine_note = logits_note(loaded.model, logits)
    exact = note_kind == "exact"
    caption("exact" if exact else "measured", engine_note)
if source == "The current step on Generate":  # a typed prompt is in view already, in its box
    tail = tokenizer.decode(context_ids[-40:])
    st.markdown(f"**Context (last part):** `…{tail[-200:]}` → **?**")

controls.set_defaults("lab", {knob.field: getattr(OPENING_SETTINGS, knob.field) for knob in controls.CLASSIC})
controls.knob_sliders("lab", controls.CLASSIC, layout.control_row(5), {"temperature": TEXT["temperature_help"]})
controls.more_controls("lab")
settings = controls.settings_from_state("lab")
temperature, top_p = settings.temperature, settings.top_p
# DRY reads the context, XTC is shown acting (as if its own coin came up), mirostat at its start (mu = 2·tau).
lab_context = StepContext(
    history=tuple(context_ids),
    xtc_u=0.0,
    breaker_ids=controls.breaker_ids(loaded.info.name, settings.dry_sequence_breakers, tokenizer)
    if settings.dry_multiplier > 0
    else frozenset(),
)
view = step_view(logits, settings, seen, u=None, context=lab_context)
if settings.xtc_probability > 0 or settings.mirostat:
    st.caption(TEXT["acting"].format(mu=2 * settings.mirostat_tau))


def kept_for_this_step(name: str, settings_key, build):
    """Made once per step's logits and `settings_key` (a slider's rerun never rebuilds the temperature frames)."""
    return kept_until_changed(name, (loaded.info.name, tuple(context_ids), settings_key), build)


st.subheader("Drag to see it move")
live_left, live_right = layout.side_by_side(2)
with live_left:
    temperature_frames = kept_for_this_step(
        "lab_temperature_frames",
        None,
        lambda: slider_frames(logits, tokenizer, "temperature", TEMPERATURE_GRID, SamplingSettings()),
    )
    live_temperature = kept_for_this_step(  # a plain go.Figure of 41 frames: ~0.15 s to build, kept while it holds
        "lab_temperature_chart",
        (temperature, presenter),
        lambda: live_slider_figure(
            logits, tokenizer, "temperature", TEMPERATURE_GRID, temperature, SamplingSettings(), presenter=presenter,
            frames=temperature_frames,
        ),
    )  # fmt: skip
    chart(live_temperature, width="stretch", key="lab_live_temperature")
    caption("exact" if exact else "measured", TEXT["live_temperature"])
with live_right:
    live_top_p = kept_for_this_step(  # 20 whole pipelines: remade when a setting moves, not on every rerun
        "lab_top_p_chart",
        (settings, presenter),
        lambda: live_slider_figure(logits, tokenizer, "top_p", TOP_P_GRID, top_p, settings, presenter=presenter,
                                   seen=seen, context=lab_context),
    )  # fmt: skip
    chart(live_top_p, width="stretch", key="lab_live_top_p")
    caption(
        "exact" if exact else "measured",
        TEXT["live_top_p"].format(**vars(settings) | {"top_k": settings.top_k or "off"}),
    )

st.subheader("All your settings together")
chart_left, chart_right = layout.side_by_side(2)
with chart_left:
    chart(
        next_token_bars(lab_table(view, logits, seen, lab_context, tokenizer, 15), presenter),
        width="stretch",
        key="lab_bars",
    )
    caption("exact" if exact else "measured", TEXT["bars"])
with chart_right:
    chart(cumulative_curve(view, tokenizer, top_p, presenter), width="stretch", key="lab_cumulative")
    caption("exact" if exact else "measured", TEXT["cumulative"])
view_summary(view)

st.subheader("Side by side")
temps = st.multiselect(
    "Temperatures to compare (2 to 4)",
    [0.0, 0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0],
    default=[0.3, 1.0, 1.5],
    max_selections=4,
    key="lab_temps",
    persist_state="session",
)
if len(temps) < 2:
    st.info(TEXT["pick_two"])
else:
    chart(
        kept_for_this_step(
            "lab_side_by_side",
            (tuple(sorted(temps)), presenter),
            lambda: temperatures_side_by_side(logits, tokenizer, sorted(temps), presenter=presenter),
        ),
        width="stretch",
        key="lab_side_by_side",
    )
    caption("exact" if exact else "measured", TEXT["side_by_side"])

st.subheader(f"Sample {DRAWS:,} times")
# Seed and button one under the other, the chart full width below: in narrow columns the button's label was cut.
draw_seed = st.number_input("Seed for the draws", 0, 2**32 - 1, 0, key="lab_draw_seed", persist_state="session")
if st.button(f"Sample {DRAWS:,} times", key="lab_sample"):
    st.session_state["lab_samples"] = (settings, int(draw_seed), tuple(context_ids))
sampled = st.session_state.get("lab_samples")
if sampled and sampled[0] == settings and sampled[1] == int(draw_seed) and sampled[2] == tuple(context_ids):
    counts = sample_many(view, DRAWS, int(draw_seed))
    names = readable_tokens(tokenizer, [int(t) for t in counts["token_id"][:-1]]) + ["other"]
    counts["token"] = names
    chart(draw_histogram(counts, DRAWS, presenter), width="stretch", key="lab_histogram")
    caption("simulated", TEXT["draws"].format(**top_draw(counts, DRAWS, draw_band)))
else:
    st.caption(TEXT["press"].format(draws=DRAWS))

st.subheader("The pipeline, stage by stage")
chart(pipeline_figure(view, tokenizer, presenter=presenter), width="stretch", key="lab_pipeline")
stages = " → ".join(STAGE_NAMES[s] for s in view.stages[1:])
caption("exact" if exact else "measured", TEXT["pipeline"].format(stages=stages))
