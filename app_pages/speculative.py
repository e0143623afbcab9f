"""Speculative decoding: a small model guesses, the real one checks, and the text is provably unchanged."""

import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.escaping import escape
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from app_pages.shared.stepper import play
from app_pages.shared.url_state import read_url_once
from inference.core.limits import Limits
from inference.core.loader import ModelLoadError, load_model
from inference.core.prompting import prepare_prompt
from inference.core.run import SEED_MAX, STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.figures import (
    acceptance_figure,
    p_q_figure,
    residual_figure,
    round_html,
    rounds_for_display,
    sweep_alpha_figure,
    sweep_figure,
    text_html,
    theory_figure,
    timeline_figure,
)
from inference.lessons.speculative.timing import SWEEP_GAMMAS, SWEEP_NEW_TOKENS, SWEEP_TEMPERATURES, compare, sweep
from inference.sampling.pipeline import SamplingSettings

RUN_KEY = "spec_run"
DRAFTERS = {"draft": "Draft model", "lookup": "Prompt lookup (no model)"}
# URL parameter -> (widget key, type): a shared link reopens the same prompt, drafter, settings and seed.
URL_PARAMS = {
    "prompt": ("spec_prompt", str),
    "d": ("spec_drafter", str),
    "g": ("spec_gamma", int),
    "t": ("spec_temperature", float),
    "p": ("spec_top_p", float),
    "k": ("spec_top_k", int),
    "minp": ("spec_min_p", float),
    "seed": ("spec_seed", int),
    "max": ("spec_max_new", int),
    "n": ("spec_rounds_in_url", int),
}
DEFAULTS = {
    "spec_prompt": "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "spec_drafter": "draft",
    "spec_gamma": 4,
    "spec_temperature": 0.8,
    "spec_top_p": 1.0,
    "spec_top_k": 0,
    "spec_min_p": 0.0,
    "spec_seed": 0,
    "spec_max_new": 60,
    "spec_rounds_in_url": 0,
}
RANGES = {
    "spec_gamma": (spec.GAMMA_MIN, spec.GAMMA_MAX),
    "spec_temperature": (0.0, 2.0),
    "spec_top_p": (0.01, 1.0),
    "spec_top_k": (0, 200),
    "spec_min_p": (0.0, 1.0),
    "spec_seed": (0, SEED_MAX),
    "spec_rounds_in_url": (0, 1000),
}
NAMES = {"spec_gamma": "γ (tokens drafted per round)", "spec_max_new": "max new tokens"}

limits = models.limits()
RANGES["spec_max_new"] = (1, limits.max_new_tokens)
loaded = current_model()
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info


@st.cache_resource(show_spinner="Loading the bundled draft model…")
def bundled_draft():
    """The project's own draft (an asset of the app, not a visitor's folder: the folder limits do not apply)."""
    return load_model(str(spec.BUNDLED_DRAFT_DIR), "float32", Limits())


url_problems = read_url_once(
    "spec_url_read",
    URL_PARAMS,
    DEFAULTS,
    RANGES,
    names=NAMES,
    choices={"spec_drafter": (DRAFTERS, "is not a drafter (use `draft` or `lookup`); using the draft model.")},
)
st.title("🎯 Speculative decoding: guess cheap, check in one pass")
st.markdown(
    "A decode step of the big model reads every weight to make **one** token. Speculative decoding lets "
    "something cheap **draft** γ tokens, then the big model (the **target**) scores all of them in **one** "
    "forward pass. Each draft token passes a random test, u ≤ p/q; at the first failure the target draws its "
    "own token from what is left, max(0, p − q). The result is **exactly** the text plain decoding would "
    "sample (greedy: the very same tokens) — only faster when the drafts are good and cheap."
)
for problem in url_problems:
    st.warning(problem)

# -- the drafter ---------------------------------------------------------------------------
st.radio(
    "Drafter",
    list(DRAFTERS),
    format_func=DRAFTERS.get,
    key="spec_drafter",
    horizontal=True,
    help="A draft model guesses with its own (small) network; prompt lookup copies what followed the "
    "last few tokens earlier in the text, and needs no model at all.",
)
draft_model = draft_tokenizer = None
draft_name = None
if st.session_state.spec_drafter == "draft":
    # The bundled draft serves every target with its tokenizer (the dense and the MoE model), whatever its name.
    bundled_problem = None
    try:
        bundled = bundled_draft()
        spec.check_pair(model, tokenizer, bundled.model, bundled.tokenizer)
    except (ModelLoadError, spec.SpeculationError) as err:
        bundled_problem = str(err)
    if bundled_problem is None:
        draft_model, draft_tokenizer, draft_name = bundled.model, bundled.tokenizer, bundled.info.name
    else:
        typed = st.text_input(
            "Draft model for this target (hub id or folder)",
            key="spec_draft_source",
            help="It must use the target's tokenizer, e.g. distilgpt2 for gpt2, SmolLM2-135M for SmolLM2-360M.",
        )
        if typed.strip():
            try:
                with st.spinner(f"Loading {typed.strip()}…"):
                    draft = models.cached_model(typed.strip(), "float32", models.server_is_public())
                draft_model, draft_tokenizer, draft_name = draft.model, draft.tokenizer, draft.info.name
            except ModelLoadError as err:
                st.warning(f"{err} Using prompt lookup instead.")
        else:
            st.warning(
                f"The bundled draft cannot serve {info.name}: {bundled_problem} Type a hub draft that shares "
                f"{info.name}'s tokenizer, or use prompt lookup (running now)."
            )
    if draft_model is not None:
        try:
            spec.check_pair(model, tokenizer, draft_model, draft_tokenizer)
        except spec.SpeculationError as err:
            st.warning(f"{err} Using prompt lookup instead, which needs no second model.")
            draft_model = None
use_draft = draft_model is not None

# -- controls ----------------------------------------------------------------------------
left, right = st.columns([3, 2])
left.text_area("Prompt", key="spec_prompt", height=100, max_chars=20_000)
with right:
    c1, c2 = st.columns(2)
    c1.number_input(
        "Seed",
        min_value=0,
        max_value=SEED_MAX,
        step=1,
        key="spec_seed",
        help="The same seed, prompt and settings always give the same tokens.",
    )
    c2.number_input(
        "Max new tokens",
        min_value=1,
        max_value=limits.max_new_tokens,
        step=10,
        key="spec_max_new",
        help=f"Capped at {limits.max_new_tokens} on this server.",
    )

b = st.columns(3)
step_clicked = b[0].button("Step (one round)", key="spec_step", type="primary", width="stretch")
play_clicked = b[1].button("Play", key="spec_play", width="stretch")
reset_clicked = b[2].button("Reset", key="spec_reset", width="stretch")

s = st.columns(2) + st.columns(3)  # two rows: labels stay whole on a narrow screen
s[0].slider(
    "γ: tokens drafted per round",
    spec.GAMMA_MIN,
    spec.GAMMA_MAX,
    step=1,
    key="spec_gamma",
    help="How many tokens the drafter guesses before the target checks them.",
)
s[1].slider(
    "Temperature",
    0.0,
    2.0,
    step=0.05,
    key="spec_temperature",
    help="0 = greedy: a draft token is kept while it is the target's top token.",
)
s[2].slider("Top-p", 0.01, 1.0, step=0.01, key="spec_top_p", help="Applied to p and q alike. 1 = off.")
s[3].slider("Top-k", 0, 200, step=1, key="spec_top_k", help="Applied to p and q alike. 0 = off.")
s[4].slider("Min-p", 0.0, 1.0, step=0.01, key="spec_min_p", help="Applied to p and q alike. 0 = off.")

settings = SamplingSettings(
    temperature=float(st.session_state.spec_temperature),
    top_p=float(st.session_state.spec_top_p),
    top_k=int(st.session_state.spec_top_k),
    min_p=float(st.session_state.spec_min_p),
)
seed, gamma = int(st.session_state.spec_seed), int(st.session_state.spec_gamma)

# -- the run -----------------------------------------------------------------------------------
prepared = prepare_prompt(
    tokenizer, st.session_state.spec_prompt, False, info.context, limits, int(st.session_state.spec_max_new)
)
for note in prepared.notes:
    st.info(note)
drafter_kind = "draft" if use_draft else "lookup"
run_key = (info.name, drafter_kind, draft_name, tuple(prepared.ids), int(st.session_state.spec_max_new), gamma, seed)


def new_drafter():
    if use_draft:
        return spec.ModelDrafter(draft_model, draft_tokenizer)
    return spec.PromptLookupDrafter(spec.vocabulary_rows(model))


run = st.session_state.get(RUN_KEY)
if prepared.error:
    st.warning(prepared.error)  # the last run stays below
elif run is None or reset_clicked or st.session_state.get("spec_run_key") != run_key:
    try:
        run = spec.new_run(
            model,
            tokenizer,
            new_drafter(),
            prepared.ids,
            min(int(st.session_state.spec_max_new), prepared.max_new_tokens),
            gamma=gamma,
            seed=seed,
        )
        st.session_state[RUN_KEY], st.session_state["spec_run_key"] = run, run_key
    except spec.SpeculationError as err:
        st.warning(str(err))

if run is not None and not prepared.error:
    with generation_slot():
        if step_clicked:
            run.step(settings)
        wanted = int(st.session_state.get("spec_rounds_in_url", 0))
        if wanted and not run.rounds:  # a shared link replays its rounds once
            list(run.run(settings, max_rounds=wanted))
            st.session_state["spec_rounds_in_url"] = 0

text_box = st.empty()


def show_text():
    if run is not None:
        text_box.markdown(text_html(tokenizer, run.prompt_ids, run.rounds), unsafe_allow_html=True)


if run is not None and play_clicked and not prepared.error:
    play(
        run,
        lambda: run.step(settings),
        show_text,
        "spec_stop",
        "Stops after the current round; what was generated stays.",
    )
show_text()

st.query_params.from_dict(
    {
        "prompt": st.session_state.spec_prompt[:1000],
        "d": st.session_state.spec_drafter,
        "g": str(gamma),
        "t": f"{settings.temperature:g}",
        "p": f"{settings.top_p:g}",
        "k": str(settings.top_k),
        "minp": f"{settings.min_p:g}",
        "seed": str(seed),
        "max": str(int(st.session_state.spec_max_new)),
        "n": str(len(run.rounds) if run else 0),
    }
)

if run is None:
    st.stop()
status = {
    STOP_EOS: "stopped: the target chose its end-of-text token",
    STOP_MAX_NEW_TOKENS: f"stopped: reached max new tokens ({run.max_new_tokens})",
    STOP_CONTEXT: f"stopped: the model's context of {run.context} tokens is full",
}
drafter_label = f"draft model {draft_name}" if use_draft else "prompt lookup"
st.caption(
    f"{info.name} checks, {drafter_label} drafts · {len(run.prompt_ids)} prompt tokens · "
    f"{len(run.generated_ids)} generated in {len(run.rounds)} target passes · "
    + (status[run.stop_reason] if run.finished else "press Step for the next round")
)
if not run.rounds:
    st.info("Press **Step** to run one round: the drafter guesses, the target checks every guess in one pass.")
    st.stop()

# -- one round, opened up ---------------------------------------------------------------------
st.subheader("One round, opened up")
shown = len(run.rounds) - 1
if len(run.rounds) > 1:
    shown = st.slider("Round", 0, len(run.rounds) - 1, len(run.rounds) - 1, key=f"spec_round_{len(run.rounds)}")
record = run.rounds[shown]
st.markdown(round_html(record), unsafe_allow_html=True)
if record.note:
    st.info(record.note)
verdict = {
    "residual": f"draft token {record.accepted + 1} failed its test, so the target drew its own token "
    f"'{escape(record.token_text)}' from the residual",
    "bonus": f"all {record.drafted} draft tokens passed, and the same target pass gave a bonus token "
    f"'{escape(record.token_text)}'",
    "target": f"nothing was drafted, so this pass made one token '{escape(record.token_text)}', as plain "
    "decoding would",
}[record.token_kind]
st.markdown(
    f"**Round {record.index}:** {record.accepted} of {record.drafted} draft tokens accepted; {verdict}. "
    f"**{len(record.new_tokens)} token(s) from one target pass.**"
)
if record.checks:
    left, right = st.container(), st.container()  # one under the other: each draft token needs the width
    with left:
        st.plotly_chart(p_q_figure(record, settings.greedy, layout.presenter()), width="stretch", key="spec_pq")
        caption(
            "exact",
            "q and p of each drafted token under the same sampling settings, from the two models' "
            "real logits (greedy runs show T=1 probabilities). Outline: green accepted, red rejected, grey "
            "never checked.",
        )
    with right:
        if settings.greedy:
            st.markdown(
                "At temperature 0 p and q are certain (100% on each model's top token): the test keeps a "
                "draft token exactly while it is the target's top token, and no random number is needed."
            )
        elif record.checked:
            st.plotly_chart(acceptance_figure(record, layout.presenter()), width="stretch", key="spec_accept")
            caption(
                "simulated",
                "u is the uniform number drawn for each test (seeded generator); the bar is "
                "min(1, p/q), computed exactly. Drafts after the first failure are never tested.",
            )
    if record.residual_top:
        st.plotly_chart(residual_figure(record, layout.presenter()), width="stretch", key="spec_residual")
        caption(
            "exact",
            "p, q and the residual normalise(max(0, p − q)) at the rejected position, for the "
            "tokens where any of them is largest; ▶ marks the token drawn from the residual. The residual "
            "gives back exactly the probability the draft took too much of: that is why the text keeps the "
            "target's distribution.",
        )

# -- the run against plain decoding -------------------------------------------------------------
st.subheader("Faster? Measured against plain decoding of the same text")
cache_key = (st.session_state.get("spec_run_key"), len(run.generated_ids))
if st.session_state.get("spec_comparison_key") != cache_key:
    with generation_slot():
        st.session_state["spec_comparison"] = compare(run, settings)
    st.session_state["spec_comparison_key"] = cache_key
result = st.session_state["spec_comparison"]
summary = result.summary
m = st.columns(3) + st.columns(3)
alpha = summary.acceptance_rate
m[0].metric(
    "α: acceptance rate",
    "–" if alpha is None else f"{alpha:.0%}",
    help=f"{summary.accepted} accepted of {summary.checked} draft tokens checked.",
)
m[1].metric(
    "Tokens per target pass",
    f"{summary.tokens_per_target_pass:.2f}",
    help=f"{summary.new_tokens} tokens from {summary.rounds} passes of the target; plain decoding makes 1.",
)
m[2].metric(
    "Measured speed-up",
    f"{result.measured_speedup:.2f}×",
    help=f"Plain decoding {result.plain.total_ms:.0f} ms vs speculative {summary.total_ms:.0f} ms for these tokens.",
)
c = result.cost_ratio
m[3].metric(
    "c: draft pass / target pass",
    "≈ 0 (a search)" if c is None else f"{c:.2f}",
    help="Median one-token draft pass over the median one-token target pass, both measured.",
)
m[4].metric(
    "Verify pass / target pass",
    f"{result.verify_cost:.2f}",
    help=f"Scoring γ + 1 = {gamma + 1} positions in one pass, against one position.",
)
predicted = result.predicted_speedup(measured_verify=True)
m[5].metric(
    "Predicted speed-up",
    "–" if predicted is None else f"{predicted:.2f}×",
    help="(1 − α^(γ+1)) / (1 − α) tokens per round ÷ (γ·c + verify cost), from this run's α and costs.",
)

st.plotly_chart(timeline_figure(run.rounds, result.plain, layout.presenter()), width="stretch", key="spec_timeline")
caption(
    "measured",
    f"Wall time on this machine: every draft pass and verify pass of this run, and plain decoding "
    f"(one target pass and one draw per token) of the same {len(run.generated_ids)} tokens, timed just now. "
    "The machine is shared: a single run can be stretched by other programs.",
)

cost = c or 0.0
st.plotly_chart(
    theory_figure(gamma, cost, result.verify_cost, alpha, result.measured_speedup, layout.presenter()),
    width="stretch",
    key="spec_theory",
)
caption(
    "exact",
    "Leviathan et al.'s formula (1 − α^(γ+1)) / ((1 − α)(γc + 1)), with c measured here; the dashed "
    "curve also charges the verify pass its measured cost. The star is this run, measured.",
)

# When it loses, said with this run's numbers.
even = spec.break_even_alpha(gamma, cost, result.verify_cost)
losses = []
if result.measured_speedup < 1:
    losses.append(
        f"**This run lost**: {result.measured_speedup:.2f}× means speculation was slower than plain decoding."
    )
if even is None:
    losses.append(
        f"At γ = {gamma} with c = {cost:.2f} and a verify pass of {result.verify_cost:.2f} target passes, "
        "even a draft that is always right cannot win: the drafting costs more than the passes it saves."
    )
else:
    losses.append(
        f"At γ = {gamma}, c = {cost:.2f} and a verify pass of {result.verify_cost:.2f} target passes, "
        f"speculation only wins when α is above **{even:.0%}**"
        + ("" if alpha is None else f" (this run: {alpha:.0%})")
        + "."
    )
losses.append(
    "Temperature changes how often p and q agree, and so α: the sweep below measures it at three temperatures."
)
st.markdown("\n\n".join(losses))

# -- sweep -----------------------------------------------------------------------------------------
st.subheader(
    f"Sweep: γ = {SWEEP_GAMMAS[0]}…{SWEEP_GAMMAS[-1]} at temperature " + ", ".join(f"{t:g}" for t in SWEEP_TEMPERATURES)
)
sweep_key = ("spec_sweep", info.name, drafter_kind, draft_name, tuple(prepared.ids))
table = measure_on_click(
    "Measure the sweep",
    "spec_sweep_button",
    sweep_key,
    lambda progress: sweep(model, tokenizer, new_drafter, prepared.ids, SWEEP_NEW_TOKENS, progress=progress),
    f"{len(SWEEP_GAMMAS) * len(SWEEP_TEMPERATURES)} speculative runs of {SWEEP_NEW_TOKENS} tokens, each timed against "
    "plain decoding of its text.",
)
if table is not None:
    left, right = layout.side_by_side(2)
    with left:
        st.plotly_chart(sweep_figure(table, layout.presenter()), width="stretch", key="spec_sweep_speed")
        caption(
            "measured",
            f"Solid: measured speed-up of each run ({SWEEP_NEW_TOKENS} tokens, seed 0, temperature "
            "the only sampling setting). Dashed: predicted from the same run's α, c and verify cost.",
        )
    with right:
        st.plotly_chart(sweep_alpha_figure(table, layout.presenter()), width="stretch", key="spec_sweep_tokens")
        caption(
            "measured",
            "Solid: tokens per target pass counted in each run. Dashed: (1 − α^(γ+1)) / (1 − α), "
            "computed exactly from that run's α.",
        )
    by_temperature = table.groupby("temperature")["alpha"].mean().dropna()
    st.markdown(
        "Mean α over γ: " + ", ".join(f"**{a:.0%}** at temperature {t:g}" for t, a in by_temperature.items()) + "."
    )
    best = table.loc[table["measured_speedup"].idxmax()]
    worst = table.loc[table["measured_speedup"].idxmin()]
    st.markdown(
        f"Best: **{best['measured_speedup']:.2f}×** at γ = {int(best['gamma'])}, temperature "
        f"{best['temperature']:g}. Worst: **{worst['measured_speedup']:.2f}×** at γ = {int(worst['gamma'])}, "
        f"temperature {worst['temperature']:g}"
        + (" — slower than plain decoding." if worst["measured_speedup"] < 1 else ".")
    )

# -- every round -------------------------------------------------------------------------------------
st.subheader("Every round")
frame = run.to_frame()
st.dataframe(rounds_for_display(frame), hide_index=True, width="stretch", key="spec_table")
st.download_button(
    "Download CSV",
    frame.to_csv(index=False).encode(),
    "inference_lab_speculative_rounds.csv",
    "text/csv",
    key="spec_csv",
)
caption("measured", "One row per round (one target pass each). Times are wall time on this machine.")
