"""Constrained decoding: a mask that forces a format, how hard it fights the model, and what it costs per token."""

import math
import statistics

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from app_pages.shared.stepper import Stepper
from inference.core.measuring import compare
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.prompting import model_kind, prepare_prompt
from inference.core.run import SEED_MAX
from inference.core.tokens import markdown_token_text
from inference.engines import llamacpp
from inference.lessons.constrained import figures
from inference.lessons.constrained.formats import (
    CHOICES,
    JSON_SCHEMA,
    PRESETS,
    REGEX,
    Format,
    FormatError,
    preset_prompt,
)
from inference.lessons.constrained.on_engine import engine_greedy, llama_cpp_request
from inference.lessons.constrained.run import ConstrainedRun, unconstrained_twin
from inference.lessons.constrained.strategies import compare_strategies
from inference.lessons.constrained.text import TEXT, sentence_token
from inference.lessons.glossary import plural
from inference.sampling.pipeline import MASK, SamplingSettings

OWN = {"Your own JSON schema": JSON_SCHEMA, "Your own regex": REGEX, "Your own choices (one per line)": CHOICES}
POSITIONS = {
    "first (before every other stage)": (),
    "after temperature, top-k and top-p": ("temperature", "top_k", "top_p", MASK),
}
FIRST_PRESET = next(iter(PRESETS))

stepper = Stepper("con", "con_run", steps_done=lambda run: len(run.records), with_back=True)
limits = models.limits()
loaded = current_model(needs_weights="the format mask runs in this process's sampling pipeline")
model, tokenizer = loaded.model, loaded.tokenizer
presenter = layout.presenter()


def fill_preset():
    """A preset fills the format box and the prompt; 'your own' keeps what is typed."""
    chosen = st.session_state.con_preset
    if chosen in PRESETS:
        st.session_state.con_spec = PRESETS[chosen][0].spec
        st.session_state.con_prompt = preset_prompt(chosen, model_kind(loaded.info.name))


# Every setting's default in the session: presenter mode folds the widgets away, and the page reads them there.
for key, value in {
    "con_preset": FIRST_PRESET,
    "con_spec": PRESETS[FIRST_PRESET][0].spec,
    "con_prompt": preset_prompt(FIRST_PRESET, model_kind(loaded.info.name)),
    "con_seed": 0,
    "con_max": 60,
    "con_t": 0.0,
    "con_k": 0,
    "con_p": 1.0,
    "con_position": next(iter(POSITIONS)),
}.items():
    st.session_state.setdefault(key, value)
st.title("🧷 Constrained decoding: a mask that forces a format")
st.markdown(TEXT["intro"], unsafe_allow_html=True)


def format_and_prompt(prompt_height: int = 80) -> None:
    st.selectbox("Format", list(PRESETS) + list(OWN), key="con_preset", persist_state="session", on_change=fill_preset)
    st.text_area(
        "The format (a JSON schema, a regex, or choices one per line)",
        key="con_spec",
        persist_state="session",
        height=150,
        max_chars=5000,
    )
    st.text_area("Prompt", key="con_prompt", persist_state="session", height=prompt_height, max_chars=5000)


def sampling_controls() -> None:
    c1, c2 = st.columns(2)
    c1.number_input("Seed", min_value=0, max_value=SEED_MAX, step=1, key="con_seed", persist_state="session")
    c2.number_input(
        "Max new tokens", min_value=1, max_value=limits.max_new_tokens, key="con_max", persist_state="session"
    )
    st.slider("Temperature (0 = greedy)", 0.0, 2.0, step=0.05, key="con_t", persist_state="session")
    c3, c4 = st.columns(2)
    c3.slider("top-k (0 = off)", 0, 100, key="con_k", persist_state="session")
    c4.slider("top-p", 0.05, 1.0, step=0.05, key="con_p", persist_state="session")
    st.radio(
        "Where the mask runs",
        list(POSITIONS),
        key="con_position",
        persist_state="session",
        help="First, it keeps every allowed token; "
        "after the filters it can only keep the allowed tokens they left, and that can be none.",
    )


now_line = None  # presenter mode: the line naming what the folded settings hold
if presenter:
    # Folded, as Generate's are: stacked on a projector they took two screens before Step and the text.
    box, now_line = layout.folded_settings(TEXT["settings_label"], "con_settings_open")
    if box is not None:
        with box:
            format_and_prompt()
            sampling_controls()
else:
    left, right = st.columns([3, 2])
    with left:
        format_and_prompt()
    with right:
        sampling_controls()

kind = (
    PRESETS[st.session_state.con_preset][0].kind
    if st.session_state.con_preset in PRESETS
    else OWN[st.session_state.con_preset]
)
settings = SamplingSettings(
    temperature=float(st.session_state.con_t),
    top_k=int(st.session_state.con_k),
    top_p=float(st.session_state.con_p),
    order=POSITIONS[st.session_state.con_position] or SamplingSettings().order,
)
problem, fmt = None, None
try:
    fmt = Format(kind, st.session_state.con_spec.strip())
    fmt.compile_ms(tokenizer, model.get_output_embeddings().weight.shape[0])  # compiles once per (tokenizer, format)
except FormatError as error:
    problem = str(error)
prepared = prepare_prompt(
    tokenizer, st.session_state.con_prompt, False, loaded.info.context, limits, int(st.session_state.con_max)
)
for note in prepared.notes:
    st.info(note)
problem = problem or prepared.error
if problem:
    st.warning(problem)  # the last run stays below
if now_line is not None:
    draw = ["greedy" if settings.temperature == 0 else f"temperature {settings.temperature:g}"]
    draw += [f"top-k {settings.top_k}"] * bool(settings.top_k) + [f"top-p {settings.top_p:g}"] * (settings.top_p < 1)
    now_line.caption(
        TEXT["settings_now"].format(
            format=st.session_state.con_preset,
            draw=" · ".join(draw),
            position="the mask after temperature, top-k and top-p"
            if POSITIONS[st.session_state.con_position]
            else "the mask first",
            seed=int(st.session_state.con_seed),
            max_new=int(st.session_state.con_max),
            prompt=markdown_token_text(st.session_state.con_prompt),
        )
    )

stepper.buttons()
run_key = (loaded.info.name, tuple(prepared.ids), fmt, int(st.session_state.con_max), int(st.session_state.con_seed))
run = stepper.current_run(
    run_key,
    lambda: ConstrainedRun(
        model, tokenizer, prepared.ids, fmt, int(st.session_state.con_max), int(st.session_state.con_seed)
    ),
    can_start=problem is None,
)
if run is None:
    st.stop()
if stepper.clicked.get("play"):
    run.halted = None
if not problem:  # a session's first run opens with its first step taken: the first screen shows one
    stepper.advance(run, lambda: run.step_or_halt(settings), step_now=stepper.opens_with_a_step(run))
text_box = st.empty()


def show_text():
    text_box.markdown(figures.text_by_fight(tokenizer, run.records, run.steps), unsafe_allow_html=True)


if not problem:
    stepper.play_if_clicked(run, lambda: run.step_or_halt(settings), show_text)
show_text()
n = len(run.records)
status = f"{len(run.trace.prompt_ids)} prompt tokens · {n} generated"
if run.trace.finished:
    status += f" · stopped: {'the format was complete' if run.complete else 'the format is not complete'}"
st.caption(status)
message = run.halted or run.unfinished_sentence()
if message:
    st.warning(message)
if not run.steps:
    st.info("Press **Step** to make the first choice under the format, **Play** to run to the end.")
    st.stop()

# -- the last step -----------------------------------------------------------------------------
record, step = run.records[-1], run.steps[-1]
vocab = len(record.logits)
metrics = [
    ("Allowed tokens", f"{step.allowed:,} of {vocab:,}"),
    ("Zₜ, mass allowed", f"{step.allowed_mass:.3g}"),
    ("Mask time", f"{step.mask_us:,.0f} µs"),
    ("Forward pass", f"{record.forward_ms:.2f} ms"),
]
cells = layout.metric_cells(len(metrics))  # whole values at 800 px; one a row on a projector ("2 of 49,…")
for cell, (name, value) in zip(cells, metrics):
    cell.metric(name, value)
st.markdown(TEXT["zt_note"], unsafe_allow_html=True)

wanted = ", ".join(f"{sentence_token(tokenizer, t)} ({p:.1%})" for t, p in step.removed_wanted[:3])
chosen = sentence_token(tokenizer, record.token_id)
st.markdown(
    TEXT["step"].format(index=step.index, allowed=step.allowed, vocab=vocab, mass=step.allowed_mass, token=chosen)
    + (TEXT["removed"].format(wanted=wanted) if wanted else "")
)
chart(
    figures.step_bars(tokenizer, record.logits, record.settings.allowed_mask(vocab), record.token_id, presenter),
    width="stretch",
)
caption(
    "exact",
    "The model's own probabilities (its softmax at T = 1) for this step; grey bars are tokens the "
    "format removed, the allowed set is llguidance's for this tokenizer.",
)

# -- over the run --------------------------------------------------------------------------------
st.subheader("Over the run")
chart(figures.fight_over_run(run.steps, presenter), width="stretch")
caption("exact", "Zₜ per step from the recorded logits and allowed sets.")
if run.trace.finished and run.steps:
    key = ("con_twin", id(run), n)
    if st.session_state.get("con_twin_key") != key:
        with generation_slot():
            st.session_state.con_twin = unconstrained_twin(run, settings)
            st.session_state.con_twin_key = key
    plain = st.session_state.con_twin
    hardest = min(run.steps, key=lambda s: s.allowed_mass)
    a, b = layout.side_by_side(2)  # stacked in presenter mode: two code columns wrapped every line at 800 px
    a.markdown("**The constrained text**" + (" (fits the format)" if fmt and fmt.matches(run.text) else ""))
    a.code(run.text or " ", language=None, wrap_lines=True)
    b.markdown("**Where the model would have gone** (same prompt, settings, seed; mask off)")
    b.code(plain.text or " ", language=None, wrap_lines=True)
    logprob, logprob_plain = run.logprob(), plain.logprob()
    gap = logprob_plain - logprob  # exact log-probabilities: how many times less likely the format made the text
    if gap <= 0:
        likelier = f"{math.exp(-gap):,.1f} times as likely"
    else:
        likelier = (f"e^{gap:.0f}" if gap > 40 else f"{math.exp(gap):,.0f}") + " times less likely"
    st.markdown(
        TEXT["cost_nothing" if gap <= 0 else "pushed"].format(model=loaded.info.name)
        + TEXT["forced"].format(
            logprob=logprob,
            logprob_plain=logprob_plain,
            tokens=n,
            likelier=likelier,
            hardest_step=hardest.index,
            hardest=hardest.allowed_mass,
        )
    )
    caption("exact", "Log-probabilities summed over the generated tokens under the model's raw distribution.")

    # -- cost ------------------------------------------------------------------------------------
    st.subheader("What the mask costs")
    chart(figures.cost_per_step(run.steps, run.records, presenter), width="stretch")
    mask_p50 = statistics.median(s.mask_us for s in run.steps)
    forward_p50 = statistics.median(r.forward_ms for r in run.records)
    st.markdown(
        TEXT["cost"].format(
            compile_ms=run.format.compile_ms(tokenizer, vocab),
            mask_us=mask_p50,
            forward_ms=forward_p50,
            share=mask_p50 / (forward_p50 * 1000 + mask_p50),
        )
    )
    with st.expander(f"Two ways to apply the mask: {TEXT['strategies_section']}"):
        if st.session_state.get("con_cost_key") != key:
            st.session_state.con_cost, st.session_state.con_cost_key = compare_strategies(run), key
        cost = st.session_state.con_cost
        chart(figures.strategy_bars(cost, presenter), width="stretch")
        valid, medians = (
            sum(cost.first_valid),
            dict(mask_us=statistics.median(cost.mask_us), draw_us=statistics.median(cost.draw_us)),
        )
        words = dict(
            strategy_words=compare(cost.sample_first_us, cost.mask_all_us).words(more="slower", less="faster"),
            mask_words=compare(cost.mask_us, cost.draw_us).words(more="more for the mask", less="less for the mask"),
        )
        said = TEXT["strategies"].format(c=cost, first_valid=valid, steps=plural(cost.steps, "step"),
                                         share=valid / cost.steps, model=loaded.info.name, vocab=vocab,
                                         same=sum(cost.same_token), **medians, **words)  # fmt: skip
        st.markdown(said)
        caption(
            "measured",
            "The wall clock around llguidance's mask, our pipeline's draw and the one-token check, each timed apart "
            "at every step of this run, replayed on this machine (shared with other visitors: a busy moment shows "
            "as spikes); the comparisons are of the medians, within the quartiles' spread.",
        )

    # -- the same format on llama.cpp ---------------------------------------------------------------
    with st.expander(f"The same format on llama.cpp's server: {TEXT['engine_section']}"):
        if llama_cpp_request(run.format) is None:
            st.info("llama.cpp's server takes a JSON schema or a GBNF grammar; a bare regex is not sent.")
        elif not llamacpp.is_built() or loaded.info.name != BUNDLED_MODEL_NAME:
            build = (
                ""
                if llamacpp.is_built()
                else "llama-server built here (`python -m inference.engines llamacpp build`) and "
            )
            now = "" if loaded.info.name == BUNDLED_MODEL_NAME else f"; {loaded.info.name} is loaded now"
            st.info(TEXT["engine_needs"].format(build=build, served=BUNDLED_MODEL_NAME, now=now))
        elif settings.temperature != 0:
            st.info("Set the temperature to 0: the comparison is greedy, where both engines must write the same text.")
        elif st.button("Run it on llama-server (starts it for one request)", key="con_engine"):
            with generation_slot(), st.spinner("Starting llama-server…"), llamacpp.serve(None) as server:
                theirs = engine_greedy(server.url, run.trace.prompt_ids, run.format, run.trace.max_new_tokens)
            ids, ms = theirs.token_ids, theirs.timings.predicted_ms
            same = (ids[:-1] if ids and ids[-1] in run.trace.eos_ids else ids) == run.text_ids  # ours leaves EOS out
            timing = TEXT["engine_timing"].format(ms=ms, tokens=len(ids)) if ms is not None else ""
            st.markdown(TEXT["engine_same" if same else "engine_differs"] + timing)
            st.code(theirs.text or " ", language=None, wrap_lines=True)
            caption("measured", "llama-server's own `timings` for this request.")
