"""Speculative decoding: a small model guesses, the real one checks, and the text is provably unchanged."""

import functools

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared import sampler_controls as controls
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot, session_lock
from app_pages.shared.stepper import Stepper
from inference.core.prompting import STORY, model_kind, prepare_prompt
from inference.core.run import SEED_MAX
from inference.core.tokens import markdown_token_text
from inference.lessons.speculative import bundled_drafts, comparison, drafting, feature_draft, self_draft, verdicts
from inference.lessons.speculative import figures as spec_fig
from inference.lessons.speculative import speed_figures as speed_fig
from inference.lessons.speculative import sweep as spec_sweep
from inference.lessons.speculative import text as spec_text
from inference.lessons.speculative.summary import round_to_show
from inference.lessons.speculative.verify_cost import measure_both, other_model, why_they_differ
from inference.sampling.pipeline import SamplingSettings

SAMPLING_KNOBS = controls.CLASSIC[:4]  # temperature, top-p, top-k, min-p: applied to p and q alike
URL_PARAMS = {**drafting.PAGE_URL_PARAMS, **controls.url_params("spec", SAMPLING_KNOBS)}
RANGES = {**drafting.PAGE_RANGES, **controls.ranges("spec", SAMPLING_KNOBS)}
stepper = Stepper("spec", "spec_run", lambda run: len(run.rounds), unit="round", step_label="Step (one round)")

limits, presenter = models.limits(), layout.presenter()
RANGES["spec_max_new"] = (1, limits.max_new_tokens)
loaded = current_model()
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info


# a draft or a sweep's other target, as the sidebar loads models (shared, cached)
load_float32 = functools.partial(models.cached_model, dtype="float32", public=models.server_is_public())


draft_dir = bundled_drafts.draft_dir_for(model)  # the bundled draft for this target: SmolLM2's, or the storytellers'
defaults = drafting.page_defaults(
    model_kind(info.name) == STORY, info.has_chat_template, draft_dir, feature_draft.fits(model)
)
url_problems = stepper.read_url(URL_PARAMS, defaults, RANGES, drafting.PAGE_NAMES, spec_text.URL_CHOICES, 1000)
st.title("🎯 Speculative decoding: guess cheap, check in one pass")
st.markdown(spec_text.INTRO)
boxes = (st.empty(), st.empty()) if presenter else ()  # presenter: the text under the intro, on the first screen
for problem in url_problems:
    st.warning(problem)

# -- the drafter ---------------------------------------------------------------------------
drafter_options = drafting.drafter_choices(model)
if st.session_state.get("spec_drafter") not in drafter_options:  # e.g. a link's self-draft on a target without one
    st.session_state.spec_drafter = "lookup"
st.radio(
    "Drafter",
    drafter_options,
    format_func=drafting.DRAFTERS.get,
    key="spec_drafter",
    persist_state="session",
    horizontal=True,
    help=spec_text.DRAFTER_HELP,
)
draft, problem = None, None  # a draft model that can serve the target; None: prompt lookup drafts
if st.session_state.spec_drafter == "draft":
    # A bundled draft serves every target with its tokenizer (the storytellers', SmolLM2's), whatever its name.
    bundled = drafting.try_draft(model, tokenizer, lambda: models.bundled_draft(str(draft_dir)))
    draft, problem = bundled.draft, spec_text.bundled_draft_unusable(info.name, bundled.problem)
    typed = (
        ""
        if draft
        else st.text_input(
            spec_text.DRAFT_SOURCE, key="spec_draft_source", persist_state="session", help=spec_text.DRAFT_SOURCE_HELP
        )
    )
    if typed.strip():
        with st.spinner(f"Loading {typed.strip()}…"):
            attempt = drafting.try_draft(model, tokenizer, lambda: load_float32(typed.strip()))
        draft, problem = attempt.draft, spec_text.typed_draft_unusable(attempt.problem, attempt.load_failed)
    if draft is None:
        st.warning(problem)
draft_name, shortlist_size = (draft.info.name if draft is not None else None), drafting.SHORTLIST_ALL
feature = None  # the feature draft: one layer reading the target's last hidden state (SmolLM2's)
if st.session_state.spec_drafter == "feature":
    try:
        feature = models.bundled_feature_draft()
        draft_name = feature.name
    except feature_draft.FeatureDraftError as err:
        st.warning(f"{err} Prompt lookup drafts instead.")
self_layers = None  # a self-draft: how many of the target's layers it keeps
if st.session_state.spec_drafter == "self":
    total_layers, short_rows = self_draft.decoder_layers(model), self_draft.shortlist_rows(model)
    layer_options = self_draft.layer_choices(total_layers)
    st.session_state.spec_self_layers = drafting.default_self_layers(
        layer_options, st.session_state.get("spec_self_layers")
    )
    c1, c2 = st.columns(2)
    layers_label, shortlist_label = spec_text.self_draft_labels(total_layers, short_rows)
    self_layers = c1.select_slider(
        layers_label, layer_options, key="spec_self_layers", persist_state="session", help=spec_text.SELF_LAYERS_HELP
    )
    shortlisted = c2.checkbox(
        shortlist_label, key="spec_self_shortlist", persist_state="session", help=spec_text.SELF_SHORTLIST_HELP
    )
    draft_name = spec_text.self_draft_name(info.name, self_layers, total_layers)
    shortlist_size = short_rows if shortlisted else drafting.SHORTLIST_ALL
if choices := spec_text.shortlist_choices(draft):  # the bundled draft: its output layer may score its commonest tokens
    shortlist_size = st.selectbox(  # under the drafter: beside it, its choices were cut at 800 px
        "Tokens the draft scores",
        list(choices),
        format_func=choices.get,
        key="spec_shortlist",
        persist_state="session",
        help=spec_text.SHORTLIST_HELP,
    )
drafter_label = spec_text.drafter_label(draft_name, shortlist_size)
if about_draft := bundled_drafts.about(draft_name):  # SmolLM2's draft: what it is, where its guesses hold
    caption("measured", about_draft)

# -- controls ----------------------------------------------------------------------------
# presenter: the prompt full width, seed and max tokens a row of their own (at 800 px labels broke: "See d")
left, right = (st.container(), st.container()) if presenter else st.columns([3, 2])
left.text_area("Prompt", key="spec_prompt", persist_state="session", height=100, max_chars=20_000)
chat = info.has_chat_template and left.checkbox(
    "Wrap in the model's chat template", key="spec_chat", persist_state="session"
)
with right:
    c1, c2 = st.columns(2)
    c1.number_input("Seed", 0, SEED_MAX, step=1, key="spec_seed", persist_state="session", help=spec_text.SEED_HELP)
    cap = limits.max_new_tokens  # "Max tokens": "Max new tokens" broke over two lines at 800 px
    c2.number_input(
        "Max tokens", 1, cap, step=10, key="spec_max_new", persist_state="session", help=spec_text.max_tokens_help(cap)
    )

stepper.buttons(reveal=not presenter)  # presenter: the round's text is under the intro
text_box, status_box = boxes or (st.empty(), st.empty())  # the text as chips (redrawn by Play), its status

s = st.columns(2) + (st.columns(2) + st.columns(1) if presenter else st.columns(3))  # labels stay whole
s[0].slider(
    "γ: drafted per round", *RANGES["spec_gamma"], key="spec_gamma", persist_state="session", help=spec_text.GAMMA
)
controls.knob_sliders("spec", SAMPLING_KNOBS, s[1:], helps=spec_text.SAMPLING_HELPS)

settings = SamplingSettings(**{k.field: k.kind(st.session_state[f"spec_{k.field}"]) for k in SAMPLING_KNOBS})
seed, gamma, max_new = (int(st.session_state[key]) for key in ("spec_seed", "spec_gamma", "spec_max_new"))

# -- the run -----------------------------------------------------------------------------------
prepared = prepare_prompt(tokenizer, st.session_state.spec_prompt, chat, info.context, limits, max_new)
for note in prepared.notes:
    st.info(note)
drafter_kind = drafting.run_kind(self_layers, draft, feature)
# γ is not in the key: a new γ drafts from the next round on and the run stays (each round keeps its own γ)
run_key = (info.name, drafter_kind, draft_name, shortlist_size, tuple(prepared.ids), max_new, seed)


def new_drafter():  # a self-draft: a new module object over the target's own layers; the shared model is only called
    return drafting.make_drafter(model, tokenizer, self_layers, draft, shortlist_size, feature)


def start_run():
    new_tokens = min(max_new, prepared.max_new_tokens)
    started, error = drafting.start_run(model, tokenizer, new_drafter, prepared.ids, new_tokens, gamma, seed)
    if error:
        st.warning(error)  # the last run stays below
    return started


if prepared.error:
    st.warning(prepared.error)  # the last run stays below
run = stepper.current_run(run_key, start_run, can_start=not prepared.error)
if run is not None and not prepared.error:
    run.use_gamma(gamma)  # the session's own run, not a shared model
    # one round on page load; the feature draft's first is the prefill alone (nothing to read yet): its second, the
    # first that drafts
    opening = stepper.opens_with_a_step(run) * (2 if feature is not None else 1)
    stepper.advance(run, lambda: run.step(settings), lambda n: list(run.run(settings, max_rounds=n)), step_now=opening)


def show_text():
    tail = spec_fig.PRESENTER_PROMPT_TAIL if presenter else spec_fig.PROMPT_TAIL  # the prompt box shows it whole
    text_box.markdown(spec_fig.text_html(tokenizer, run.prompt_ids, run.rounds, tail), unsafe_allow_html=True)


if run is not None and not prepared.error:
    stepper.play_if_clicked(run, lambda: run.step(settings), show_text)
if run is not None:
    show_text()

knob_values = {knob.param: f"{getattr(settings, knob.field):g}" for knob in SAMPLING_KNOBS}
stepper.mirror_url(run, {**drafting.link_values(st.session_state, shortlist_size), **knob_values})

if run is None:
    st.stop()
lead = spec_text.run_lead(info.name, draft_name, len(run.prompt_ids), len(run.generated_ids), len(run.rounds))
status_box.caption(stepper.status_text(run, lead, spec_text.NEXT_ROUND, chooser="the target"))
if not run.rounds:
    st.info(spec_text.NO_ROUND_YET)
    st.stop()

# -- one round, opened up ---------------------------------------------------------------------
st.subheader("One round, opened up")
with st.expander(f"{spec_text.HOW_HEADING}: {spec_text.HOW_SUMMARY}"):
    st.markdown(spec_text.HOW_A_ROUND_WORKS)
last, opened = len(run.rounds) - 1, round_to_show(run.rounds)  # not a final round that drafted nothing
shown = st.slider("Round", 0, last, opened, key=f"spec_round_{last + 1}", persist_state="session") if last else opened
record = run.with_t1_probabilities(run.rounds[shown])  # a greedy round's chart shows T=1 probabilities
st.markdown(spec_fig.round_html(record), unsafe_allow_html=True)
if record.note:
    st.info(record.note)
st.markdown(spec_text.round_sentence(record, markdown_token_text(record.token_text)))
if record.checks:  # one chart under the other: each draft token needs the width
    chart(spec_fig.p_q_figure(record, record.greedy, presenter), width="stretch", key="spec_pq")
    caption("exact", spec_text.CAPTIONS["pq"])
    if record.greedy:  # the round's own rule: the settings may have changed since
        st.markdown(spec_text.GREEDY_TEST)
    elif record.checked:
        chart(spec_fig.acceptance_figure(record, presenter), width="stretch", key="spec_accept")
        caption("simulated", spec_text.CAPTIONS["accept"])
    if record.residual_top:
        chart(spec_fig.residual_figure(record, presenter), width="stretch", key="spec_residual")
        caption("exact", spec_text.CAPTIONS["residual"])

# -- the run against plain decoding -------------------------------------------------------------
st.subheader("Faster? Measured against plain decoding of the same text")
# the kept plain timing grows on its cache: one rerun at a time
result = comparison.kept_comparison(run, settings, st.session_state, guards=(generation_slot, session_lock))
if presenter:  # an HTML table wraps its text: projector-sized metrics were cut at 800 px ("89% (8 …")
    st.table(spec_fig.metrics_table(spec_text.run_metrics(result, gamma)))
else:
    for cell, (label, value, help_text) in zip(st.columns(2) * 3, spec_text.run_metrics(result, gamma)):
        cell.metric(label, value, help=help_text)
st.markdown(spec_text.ALPHA_DEFINITION)

chart(speed_fig.timeline_figure(run.rounds, result.plain, presenter), width="stretch", key="spec_timeline")
caption("measured", spec_text.timeline_caption(len(run.generated_ids)))

alpha, cost = result.summary.acceptance_rate, result.cost_ratio or 0.0
with st.expander(f"Theory: {spec_text.THEORY_SUMMARY}"):
    theory = speed_fig.theory_figure(gamma, cost, result.verify_cost, alpha, result.measured_speedup, presenter)
    chart(theory, width="stretch", key="spec_theory")
    caption("exact", spec_text.CAPTIONS["theory"])

other = drafting.other_side(info.name) if draft is not None else None  # both sides of the trade, measured
# when it loses, why a verify pass costs what it does here, what c is, what the formula leaves out
said = verdicts.run_verdict(result, spec_sweep.weight_bytes(model), other_target=other[0] if other else None)
st.markdown("\n\n".join(said))

# -- the verify pass on two models, the sweep, every round, sources: closed sections, one line each ----------------
if verify_other := other_model(info.name):
    with st.expander(f"{spec_text.VERIFY_HEADING}: {spec_text.VERIFY_SUMMARY}"):
        costs = measure_on_click(
            "Measure both verify passes",
            "spec_verify_button",
            ("spec_verify", info.name, verify_other, gamma + 1),
            lambda progress: measure_both(model, info.name, verify_other, load_float32, gamma + 1, progress),
            spec_text.verify_not_yet(info.name, verify_other[0], gamma + 1),
        )
        for cell, side in zip(st.columns(2), costs or ()):
            cell.metric(f"{side.name}: {side.positions} tokens in one pass", f"{side.cost:.2f} one-token passes")
            cell.caption(f"{side.verify_ms:.1f} ms against {side.one_token_ms:.1f} ms for one token")
        if costs is not None:
            caption("measured", spec_text.verify_caption(gamma + 1))
            st.markdown(why_they_differ(*costs))

sweep_heading = spec_text.sweep_heading(spec_sweep.SWEEP_GAMMAS, spec_sweep.SWEEP_TEMPERATURES)
with st.expander(f"{sweep_heading}: {spec_text.SWEEP_SUMMARY}"):
    table = measure_on_click(
        "Measure the sweep",
        "spec_sweep_button",
        ("spec_sweep", info.name, drafter_kind, draft_name, shortlist_size, tuple(prepared.ids), other),
        lambda p: drafting.page_sweep((info.name, model, tokenizer), other, load_float32, new_drafter, prepared.ids, p),
        spec_text.sweep_not_yet(spec_sweep.SWEEP_NEW_TOKENS, drafter_label, other),
    )
    for index, (target_name, side) in enumerate(table.groupby("target", sort=False) if table is not None else ()):
        st.markdown(spec_text.side_heading(target_name, int(side["weight_bytes"].iloc[0])))  # one under the other
        chart(speed_fig.sweep_figure(side, presenter), width="stretch", key=f"spec_sweep_speed_{index}")
        caption("measured", spec_text.sweep_speed_caption(spec_sweep.SWEEP_NEW_TOKENS, drafter_label))
        chart(speed_fig.sweep_alpha_figure(side, presenter), width="stretch", key=f"spec_sweep_tokens_{index}")
        caption("measured", spec_text.sweep_tokens_caption(drafter_label))
        st.markdown("\n\n".join(verdicts.sweep_findings(side)))
    if table is not None:  # why a side wins or loses: what a pass of several tokens costs on each target
        chart(speed_fig.sweep_verify_figure(table, presenter), width="stretch", key="spec_sweep_verify")
        caption("measured", spec_text.CAPTIONS["sweep_verify"])
        st.markdown(verdicts.both_sides(table) or "")

with st.expander(f"Every round: {spec_text.ROUNDS_SUMMARY}"):
    frame = run.to_frame()
    st.dataframe(spec_fig.rounds_for_display(frame), hide_index=True, width="stretch", key="spec_table")
    st.download_button(  # the CSV is made when it is downloaded, not on every rerun
        "Download CSV",
        lambda: frame.to_csv(index=False).encode(),
        "inference_lab_speculative_rounds.csv",
        key="spec_csv",
    )
    caption("measured", spec_text.CAPTIONS["rounds"])
with st.expander(f"Sources and notes: {spec_text.SOURCES_SUMMARY}"):
    st.markdown(spec_text.ALPHA_SOURCE)
