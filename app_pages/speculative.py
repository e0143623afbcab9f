"""Speculative decoding: a small model guesses, the real one checks, and the text is provably unchanged."""

import functools

import pandas as pd
import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared import sampler_controls as controls
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot, session_lock
from app_pages.shared.stepper import Stepper
from inference.core.machine import describe_bytes
from inference.core.prompting import STORY, model_kind, prepare_prompt
from inference.core.quantize import weight_bytes
from inference.core.run import SEED_MAX
from inference.core.tokens import markdown_token_text
from inference.lessons.speculative import comparison, drafters, drafting, feature_draft, text
from inference.lessons.speculative import figures as fig
from inference.lessons.speculative.rule import SpeculationError
from inference.lessons.speculative.run import new_run
from inference.lessons.speculative.text import T
from inference.sampling.pipeline import SamplingSettings

SAMPLING_KNOBS = controls.CLASSIC[:4]  # temperature, top-p, top-k, min-p: applied to p and q alike
URL_PARAMS = {**drafting.PAGE_URL_PARAMS, **controls.url_params("spec", SAMPLING_KNOBS)}
RANGES = {**drafting.PAGE_RANGES, **controls.ranges("spec", SAMPLING_KNOBS)}


def kept(key: str, help_key: str | None = None) -> dict:  # a widget the session keeps across pages
    return {"key": key, "persist_state": "session", "help": T[help_key] if help_key else None}


stepper = Stepper("spec", "spec_run", lambda run: len(run.rounds), unit="round", step_label="Step (one round)")

limits, presenter = models.limits(), layout.presenter()
RANGES["spec_max_new"] = (1, limits.max_new_tokens)
loaded = current_model()
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
# a draft or a sweep's other target, as the sidebar loads models (shared, cached)
load_float32 = functools.partial(models.cached_model, dtype="float32", public=models.server_is_public())

draft_dir = drafting.draft_dir_for(model)  # the bundled draft for this target: SmolLM2's, or the storytellers'
is_story = model_kind(info.name) == STORY
defaults = drafting.page_defaults(is_story, info.has_chat_template, draft_dir, feature_draft.fits(model))
url_problems = stepper.read_url(URL_PARAMS, defaults, RANGES, drafting.PAGE_NAMES, text.URL_CHOICES, 1000)
st.title("🎯 Speculative decoding: guess cheap, check in one pass")
st.markdown(T["intro"])
boxes = (st.empty(), st.empty()) if presenter else ()  # presenter: the text under the intro, on the first screen
for problem in url_problems:
    st.warning(problem)

# -- the drafter ---------------------------------------------------------------------------
drafter_options = drafting.drafter_choices(model)
if st.session_state.get("spec_drafter") not in drafter_options:  # e.g. a link's self-draft on a target without one
    st.session_state.spec_drafter = "lookup"
radio = {"format_func": drafting.DRAFTERS.get, "horizontal": True} | kept("spec_drafter", "drafter_help")
choice = st.radio("Drafter", drafter_options, **radio)
draft, feature, self_layers, shortlist_size = None, None, None, drafting.SHORTLIST_ALL
draft_name = None  # None: prompt lookup drafts
if choice == "draft":  # the bundled draft serves every target with its tokenizer, whatever its name
    draft, problem = drafting.try_draft(model, tokenizer, lambda: models.bundled_draft(str(draft_dir)))
    problem = problem and T["bundled_unusable"].format(target=info.name, problem=problem)
    typed = "" if draft else st.text_input(T["draft_source"], **kept("spec_draft_source", "draft_source_help"))
    if typed.strip():
        with st.spinner(f"Loading {typed.strip()}…"):
            draft, problem = drafting.try_draft(model, tokenizer, lambda: load_float32(typed.strip()))
        problem = problem and T["typed_unusable"].format(problem=problem)
    if draft is None:
        st.warning(problem)
    draft_name = draft.info.name if draft is not None else None
if choice == "feature":  # one layer reading the target's last hidden state (SmolLM2's)
    try:
        feature = models.bundled_feature_draft()
        draft_name = feature_draft.FEATURE_DRAFT_NAME
    except feature_draft.FeatureDraftError as err:
        st.warning(T["feature_unusable"].format(problem=err))
if choice == "self":  # how many of the target's layers it keeps, and whether it scores the tokenizer's first ids
    total_layers = int(model.config.num_hidden_layers)
    short_rows = min(drafters.SELF_SHORTLIST_ROWS, int(model.get_output_embeddings().weight.shape[0]))
    options = drafters.layer_choices(total_layers)
    if st.session_state.get("spec_self_layers") not in options:
        st.session_state.spec_self_layers = options[len(options) // 2]
    c1, c2 = st.columns(2)
    label = T["self_layers"].format(layers=total_layers)
    self_layers = c1.select_slider(label, options, **kept("spec_self_layers", "self_layers_help"))
    label = T["self_shortlist"].format(rows=short_rows)
    shortlisted = c2.checkbox(label, **kept("spec_self_shortlist", "self_shortlist_help"))
    draft_name = T["self_name"].format(target=info.name, layers=self_layers, of=total_layers)
    shortlist_size = short_rows if shortlisted else drafting.SHORTLIST_ALL
if choices := drafting.shortlist_choices(draft) if draft is not None else {}:  # a bundled draft: its commonest tokens
    # under the drafter: beside it, its choices were cut at 800 px
    label, shown = "Tokens the draft scores", choices.get
    shortlist_size = st.selectbox(label, list(choices), format_func=shown, **kept("spec_shortlist", "shortlist_help"))
drafter_text = drafting.drafter_label(draft_name, shortlist_size)
if about := text.about_draft(draft_name):  # SmolLM2's drafts: what each is, where its guesses hold
    caption("measured", about)

# -- controls ------------------------------------------------------------------------------
# presenter: the prompt full width, seed and max tokens a row of their own (at 800 px labels broke: "See d")
left, right = (st.container(), st.container()) if presenter else st.columns([3, 2])
left.text_area("Prompt", height=100, max_chars=20_000, **kept("spec_prompt"))
chat = info.has_chat_template and left.checkbox("Wrap in the model's chat template", **kept("spec_chat"))
c1, c2 = right.columns(2)
c1.number_input("Seed", 0, SEED_MAX, step=1, **kept("spec_seed", "seed_help"))
cap = limits.max_new_tokens  # "Max tokens": "Max new tokens" broke over two lines at 800 px
c2.number_input("Max tokens", 1, cap, step=10, **kept("spec_max_new") | {"help": T["max_help"].format(cap=cap)})

stepper.buttons(reveal=not presenter)  # presenter: the round's text is under the intro
text_box, status_box = boxes or (st.empty(), st.empty())  # the text as chips (redrawn by Play), its status
s = st.columns(2) + (st.columns(2) + st.columns(1) if presenter else st.columns(3))  # labels stay whole
s[0].slider("γ: drafted per round", *RANGES["spec_gamma"], **kept("spec_gamma", "gamma_help"))
controls.knob_sliders("spec", SAMPLING_KNOBS, s[1:], helps=text.SAMPLING_HELPS)
settings = SamplingSettings(**{k.field: k.kind(st.session_state[f"spec_{k.field}"]) for k in SAMPLING_KNOBS})
seed, gamma, max_new = (int(st.session_state[key]) for key in ("spec_seed", "spec_gamma", "spec_max_new"))

# -- the run -------------------------------------------------------------------------------
prepared = prepare_prompt(tokenizer, st.session_state.spec_prompt, chat, info.context, limits, max_new)
for note in prepared.notes:
    st.info(note)
drafter_kind = "feature" if feature is not None else "self" if self_layers else "draft" if draft else "lookup"
# γ is not in the key: a new γ drafts from the next round on and the run stays (each round keeps its own γ)
run_key = (info.name, drafter_kind, draft_name, shortlist_size, tuple(prepared.ids), max_new, seed)
new_drafter = functools.partial(drafting.make_drafter, model, tokenizer, self_layers, draft, shortlist_size, feature)


def start_run():
    try:
        return new_run(
            model, tokenizer, new_drafter(), prepared.ids, min(max_new, prepared.max_new_tokens), gamma, seed
        )
    except SpeculationError as err:
        st.warning(str(err))  # the last run stays below


if prepared.error:
    st.warning(prepared.error)  # the last run stays below
run = stepper.current_run(run_key, start_run, can_start=not prepared.error)
if run is not None and not prepared.error:
    run.use_gamma(gamma)  # the session's own run, not a shared model
    # one round on page load; the feature draft's first is the prefill alone (nothing to read yet): its second drafts
    opening = stepper.opens_with_a_step(run) * (2 if feature is not None else 1)
    stepper.advance(run, lambda: run.step(settings), lambda n: list(run.run(settings, max_rounds=n)), step_now=opening)


def show_text():
    tail = fig.PRESENTER_PROMPT_TAIL if presenter else fig.PROMPT_TAIL  # the prompt box shows it whole
    text_box.markdown(fig.text_html(tokenizer, run.prompt_ids, run.rounds, tail), unsafe_allow_html=True)


if run is not None and not prepared.error:
    stepper.play_if_clicked(run, lambda: run.step(settings), show_text)
if run is not None:
    show_text()
knob_values = {knob.param: f"{getattr(settings, knob.field):g}" for knob in SAMPLING_KNOBS}
link = {param: str(st.session_state[key]) for param, (key, _) in drafting.PAGE_URL_PARAMS.items()}
stepper.mirror_url(run, link | {"prompt": link["prompt"][:1000], "sl": str(shortlist_size)} | knob_values)
if run is None:
    st.stop()
counts = {"prompt": len(run.prompt_ids), "generated": len(run.generated_ids), "rounds": len(run.rounds)}
lead = T["lead"].format(target=info.name, drafter=drafter_text, **counts)
status_box.caption(stepper.status_text(run, lead, T["next_round"], chooser="the target"))
if not run.rounds:
    st.info(T["no_round"])
    st.stop()

# -- one round, opened up --------------------------------------------------------------------
st.subheader("One round, opened up")
with st.expander(T["how_heading"]):
    st.markdown(T["how"])
last, opened = len(run.rounds) - 1, comparison.round_to_show(run.rounds)  # not a final round that drafted nothing
shown = st.slider("Round", 0, last, opened, key=f"spec_round_{last + 1}", persist_state="session") if last else opened
record = run.rounds[shown]
st.markdown(fig.round_html(record), unsafe_allow_html=True)
if record.note:
    st.info(record.note)
st.markdown(text.round_sentence(record, markdown_token_text(record.token_text)))
if record.checks:  # one chart under the other: each draft token needs the width
    chart(fig.p_q_figure(record, record.greedy, presenter), width="stretch", key="spec_pq")
    caption("exact", T["pq"])
    if record.greedy:  # the round's own rule: the settings may have changed since
        st.markdown(T["greedy_test"])
    elif record.checked:
        chart(fig.acceptance_figure(record, presenter), width="stretch", key="spec_accept")
        caption("simulated", T["accept"])
    if record.residual_top:
        chart(fig.residual_figure(record, presenter), width="stretch", key="spec_residual")
        caption("exact", T["residual"])

# -- the run against plain decoding ------------------------------------------------------------
st.subheader("Faster? Measured against plain decoding of the same text")
# the kept plain timing grows on its cache: one rerun at a time
result = comparison.run_against_plain(run, settings, st.session_state, (generation_slot, session_lock))
metrics = text.run_metrics(result)
if presenter:  # an HTML table wraps its text: projector-sized metrics were cut at 800 px ("89% (8 …")
    st.table(pd.DataFrame(metrics, columns=["measure", "value", "how"]).set_index("measure"))
else:
    for cell, (label, value, help_text) in zip(st.columns(2) * 3, metrics):
        cell.metric(label, value, help=help_text)
st.markdown(T["alpha"])
chart(fig.timeline_figure(run.rounds, result.plain, presenter), width="stretch", key="spec_timeline")
caption("measured", T["timeline"].format(tokens=len(run.generated_ids)))
with st.expander(T["theory_heading"]):
    alpha, cost = result.summary.acceptance_rate, result.cost_ratio or 0.0
    theory = fig.theory_figure(gamma, cost, result.verify_cost, alpha, result.measured_speedup, presenter)
    chart(theory, width="stretch", key="spec_theory")
    caption("exact", T["theory"])
other = drafting.other_side(info.name) if draft is not None else None  # both sides of the trade, measured
st.markdown(text.run_verdict(result, weight_bytes(model), other[0] if other else None))

# -- the verify pass on two models, the sweep, every round, sources: closed sections ---------------------------------
if verify_other := comparison.other_model(info.name):
    with st.expander(T["verify_heading"]):
        costs = measure_on_click(
            "Measure both verify passes",
            "spec_verify_button",
            ("spec_verify", info.name, verify_other, gamma + 1),
            lambda p: comparison.measure_both(model, info.name, verify_other, load_float32, gamma + 1, p),
            T["verify_not_yet"].format(positions=gamma + 1, target=info.name, other=verify_other[0]),
        )
        for cell, side in zip(st.columns(2), costs or ()):
            cell.metric(
                T["verify_metric"].format(name=side.name, positions=side.positions),
                T["verify_value"].format(cost=side.cost),
            )
            cell.caption(T["verify_detail"].format(many=side.many.median_ms, one=side.one.median_ms))
        if costs is not None:
            full = T["verify_caption"].format(positions=gamma + 1, many=costs[0].many.label(), one=costs[0].one.label())
            caption("measured", full)
            st.markdown(text.why_they_differ(*costs))


def sides() -> list[tuple]:  # the sweep's targets: this one, and the other bundled target the draft serves
    if other is None:
        return [(info.name, model, tokenizer)]
    beside = load_float32(other[1])
    return [(info.name, model, tokenizer), (other[0], beside.model, beside.tokenizer)]


with st.expander(T["sweep_heading"]):
    runs = len(comparison.SWEEP_GAMMAS) * len(comparison.SWEEP_TEMPERATURES)
    also = T["sweep_also"].format(runs=runs, other=markdown_token_text(other[0])) if other else ""
    tokens = comparison.SWEEP_NEW_TOKENS
    table = measure_on_click(
        "Measure the sweep",
        "spec_sweep_button",
        ("spec_sweep", info.name, drafter_kind, draft_name, shortlist_size, tuple(prepared.ids), other),
        lambda p: comparison.sweep_sides(sides(), new_drafter, prepared.ids, p),
        T["sweep_not_yet"].format(runs=runs, tokens=tokens, drafter=drafter_text, also=also),
    )
    for index, (target_name, side) in enumerate(table.groupby("target", sort=False) if table is not None else ()):
        weights = describe_bytes(int(side["weight_bytes"].iloc[0]))
        st.markdown(T["side"].format(target=markdown_token_text(target_name), weights=weights))
        chart(fig.sweep_figure(side, presenter), width="stretch", key=f"spec_sweep_speed_{index}")
        caption("measured", T["sweep_speed"].format(drafter=drafter_text, tokens=tokens))
        chart(fig.sweep_alpha_figure(side, presenter), width="stretch", key=f"spec_sweep_tokens_{index}")
        caption("measured", T["sweep_tokens"].format(drafter=drafter_text))
        st.markdown(text.sweep_findings(side))
    if table is not None:  # why a side wins or loses: what a pass of several tokens costs on each target
        chart(fig.sweep_verify_figure(table, presenter), width="stretch", key="spec_sweep_verify")
        caption("measured", T["sweep_verify"])
        st.markdown(text.both_sides(table))

with st.expander(T["rounds_heading"]):
    frame = run.to_frame()
    st.dataframe(fig.rounds_for_display(frame), hide_index=True, width="stretch", key="spec_table")
    csv = "inference_lab_speculative_rounds.csv"  # made when it is downloaded, not on every rerun
    st.download_button("Download CSV", lambda: frame.to_csv(index=False).encode(), csv, key="spec_csv")
    caption("measured", T["rounds"])
with st.expander(T["sources_heading"]):
    st.markdown(T["alpha_source"])
