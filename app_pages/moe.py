"""Mixture of Experts: which experts real tokens go to, how evenly, and what sparsity costs and buys."""

import pandas as pd
import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from app_pages.shared.stepper import Stepper
from app_pages.shared.url_state import read_url_index
from inference.core import routing
from inference.core.calculator import load_public_models
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.core.run import SEED_MAX, new_trace
from inference.core.tokens import markdown_token_text, token_text
from inference.lessons.moe import experts as expert_work
from inference.lessons.moe import figures as mf
from inference.lessons.moe import scale as moe_scale
from inference.lessons.moe import stored
from inference.lessons.moe import text as moe_text
from inference.lessons.moe.text import TEXT
from inference.sampling.pipeline import SamplingSettings

INPUTS_KEY = "moe_mlp_inputs"  # (token ids, [layers, tokens, hidden]): recomputed only when the text changes

limits, loaded, presenter = models.limits(), current_model(), layout.presenter()


def table(frame, key: str, **formats) -> None:
    """A dataframe with number formats by column, or a ProgressColumn for `progress=` (a share from 0 to 1)."""
    config = {c: st.column_config.NumberColumn(format=f) for c, f in formats.items() if c != "progress"}
    if "progress" in formats:
        config[formats["progress"]] = st.column_config.ProgressColumn(format="percent", min_value=0, max_value=1)
    st.dataframe(frame, hide_index=True, key=key, column_config=config)


model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
stepper = Stepper("moe", "moe_trace", steps_done=lambda trace: len(trace.records))

st.title("🧩 Mixture of Experts")
dense_meta = stored.training_stats(BUNDLED_MODEL_DIR)
intro_pair = stored.trained_pair(stored.training_stats(routing.BUNDLED_MOE_DIR), dense_meta)  # what the page measures
st.markdown(TEXT["intro"] + "\n\n" + moe_text.intro_verdict(intro_pair, routing.BUNDLED_MOE_NAME, BUNDLED_MODEL_NAME))

# -- a dense model: nothing to route ------------------------------------------------------------
moe_loaded = routing.has_experts(model)
if not moe_loaded:
    st.info(TEXT["no_experts"].format(model=info.name))
    if routing.BUNDLED_MOE_DIR.is_dir():
        if st.button(
            f"Load the bundled MoE model ({routing.BUNDLED_MOE_NAME})", key="moe_load_bundled", type="primary"
        ):
            st.session_state[models.MODEL_SOURCE_KEY] = str(routing.BUNDLED_MOE_DIR)
            st.session_state.pop(models.MODEL_ERROR_KEY, None)
            st.rerun()
    else:
        st.warning(TEXT["bundled_moe_missing"].format(folder=routing.BUNDLED_MOE_DIR.name))

if moe_loaded:
    shape = routing.ExpertShape.of(model)
    problems = read_url_index("layer", "moe_layer", shape.layers - 1, "layer") + read_url_index(
        "expert", "moe_expert", shape.experts - 1, "expert"
    )
    for problem in problems:
        st.warning(problem)
    folder = stored.model_folder(st.session_state.get(models.MODEL_SOURCE_KEY, ""))
    stats, load_log = stored.read(folder, routing.STATS_FILE), stored.read(folder, routing.LOAD_LOG_FILE)
    st.markdown(TEXT["shape"].format(model=info.name, layers=shape.layers, experts=shape.experts, k=shape.k))

    # -- 1. routing, live ---------------------------------------------------------------------
    st.subheader("1. Routing, live: which experts each token goes to")
    # In presenter mode the prompt takes its own row: a fifth of the width broke "Temperature" mid-word.
    left, right = (st.container(), st.container()) if presenter else st.columns([3, 2])
    left.text_input("Prompt", moe_text.PROMPT, key="moe_prompt", persist_state="session", max_chars=2000)
    r = right.columns(2)
    r[0].slider(
        "Temperature", 0.0, 1.5, 0.8, step=0.05, key="moe_temperature", persist_state="session", help="0 = greedy."
    )
    r[1].number_input("Seed", 0, SEED_MAX, 0, key="moe_seed", persist_state="session")
    stepper.buttons()
    # A model with fewer layers or experts than the last one keeps the widgets in range.
    st.session_state["moe_layer"] = min(int(st.session_state.get("moe_layer", 0)), shape.layers - 1)
    st.session_state["moe_expert"] = min(int(st.session_state.get("moe_expert", 0)), shape.experts - 1)
    layer = 0
    if shape.layers > 1:
        layer = st.slider(
            "Layer", 0, shape.layers - 1, key="moe_layer", persist_state="session", help=moe_text.HELP["layer"]
        )

    settings = SamplingSettings(temperature=float(st.session_state.moe_temperature))
    prompt_ids = encode_prompt(tokenizer, st.session_state.moe_prompt or " ")
    max_new = min(60, limits.max_new_tokens, info.context - len(prompt_ids) - 1)
    run_key = (info.name, tuple(prompt_ids), int(st.session_state.moe_seed))
    if max_new < 1:
        st.warning(f"The prompt has {len(prompt_ids)} tokens; this model's context holds {info.context}. Shorten it.")
    trace = stepper.current_run(
        run_key,
        lambda: new_trace(model, tokenizer, prompt_ids, max_new, int(st.session_state.moe_seed)),
        can_start=max_new >= 1,
    )
    if trace is not None:  # the first step routes the prompt: show it at once
        stepper.advance(trace, lambda: trace.step(settings), step_now=not trace.records)
    chips_box = st.empty()

    def show_chips():
        recorded = routing.trace_routing(trace)
        experts, weights = recorded.chosen()
        texts = [token_text(tokenizer, t) for t in recorded.token_ids]
        pending = trace.records[-1].token_text if trace.records else None
        chips_box.markdown(
            mf.routing_chips(texts, experts[layer].tolist(), weights[layer].tolist(), pending, presenter),
            unsafe_allow_html=True,
        )

    if trace is not None:
        stepper.play_if_clicked(trace, lambda: trace.step(settings), show_chips)

    recorded = routing.trace_routing(trace) if trace is not None else None
    if recorded is not None:
        show_chips()
        st.markdown(mf.expert_legend(shape.experts, presenter), unsafe_allow_html=True)
        fed = len(recorded.token_ids)
        caption("exact", TEXT["chips_caption"].format(layer=layer, k=shape.k, routed=fed))
        experts, weights = recorded.chosen()
        texts = [token_text(tokenizer, t) for t in recorded.token_ids]
        chart(mf.routing_heatmap(texts, experts, weights, recorded.probabilities, presenter), key="moe_heatmap")
        caption("exact", TEXT["heatmap_caption"])

        # -- 2. one token's router -----------------------------------------------------------
        st.subheader("2. One token's router")
        if st.session_state.get("moe_token_fed") != (run_key, fed) or st.session_state.get("moe_token", 0) >= fed:
            # The text grew (Step, Play) or changed: show the newest routed token. (The slider's range
            # changes with it, and Streamlit would otherwise reset it to token 0.)
            st.session_state["moe_token"] = fed - 1
            st.session_state["moe_token_fed"] = (run_key, fed)
        token = 0
        if fed > 1:
            token = st.slider(
                "Token", 0, fed - 1, key="moe_token", persist_state="session", help=moe_text.HELP["token"]
            )
        probs = recorded.probabilities[layer, token].tolist()
        kept, kept_weights = experts[layer, token].tolist(), weights[layer, token].tolist()
        st.markdown(
            moe_text.token_router(token, markdown_token_text(repr(texts[token])), layer, probs, kept, kept_weights)
        )
        chart(mf.router_figure(probs, kept, kept_weights, presenter), key="moe_router")
        caption("exact", TEXT["router_caption"])
        ids_now = tuple(recorded.token_ids)
        cached = st.session_state.get(INPUTS_KEY)
        if cached is None or cached[0] != (info.name, ids_now):
            with generation_slot():
                st.session_state[INPUTS_KEY] = ((info.name, ids_now), expert_work.mlp_inputs(model, list(ids_now)))
        mix = expert_work.mixture(model, st.session_state[INPUTS_KEY][1][layer, token], layer)
        chart(mf.mixture_figure(mix, presenter), key="moe_mixture")
        caption(
            "exact", TEXT["mixture_caption"].format(routed=fed, shown=min(24, len(mix.mixture)), width=len(mix.mixture))
        )

    # -- 3. load ------------------------------------------------------------------------------
    st.subheader("3. Load: does every expert get work?")
    if stats is not None:
        final, early, source = stats["load"]["fractions"][layer], load_log[0] if load_log else None, stats["source"]
        label = f"validation stories ({source['tokens']:,} tokens)"
        chart(mf.load_figure(final, early, shape.k, layer, label, presenter), key="moe_load")
        said = TEXT["stored_load_caption"].format(layer=layer, **source)
        caption("exact", said + (" " + TEXT["early_load"].format(step=early["step"]) if early else ""))
        even = 1 / len(final)
        st.markdown(TEXT["layer_load"].format(layer=layer, busiest=max(final), idlest=min(final), even=even))
    else:
        counts = recorded.counts()[layer] if recorded is not None else None
        st.info(TEXT["no_stats"])
        if counts is not None:
            share = (counts.double() / counts.sum()).tolist()
            chart(mf.load_figure(share, None, shape.k, layer, "this text", presenter), key="moe_load")
            caption("exact", TEXT["text_load_caption"].format(layer=layer, tokens=len(recorded.token_ids)))
    if load_log:
        chart(mf.balance_over_training(load_log, presenter), key="moe_balance")
        caption("exact", TEXT["balance_caption"])
        balance = stored.balance(load_log, shape.layers, shape.experts)
        outcome = TEXT["balance_idle" if balance["idle_last"] else "balance_even"]
        st.markdown(TEXT["balance"].format(**balance, outcome=outcome))
    elif stats is not None:
        st.caption(TEXT["no_load_log"])

    # -- 4. what the experts learned ------------------------------------------------------------
    st.subheader("4. What the experts learned")
    experts_list = list(range(shape.experts))  # the session's choice is kept in range above
    expert = st.selectbox(
        "Expert", experts_list, key="moe_expert", persist_state="session", format_func="expert {}".format
    )
    if stats is not None:
        table(stored.top_tokens_table(stats, layer, expert), "moe_top_tokens", progress="share sent here")
        picks = stats["load"]["counts"][layer][expert]
        shares = dict(k=shape.k, experts=shape.experts, even=shape.k / shape.experts, tokens=stats["source"]["tokens"])
        caption("exact", TEXT["top_tokens_caption"].format(expert=expert, layer=layer, picks=picks, **shares))
        word = stored.word_information(stats, layer)
        verdict = TEXT["word_decides" if word["share"] >= 0.5 else "word_does_not"]
        st.markdown(TEXT["word_verdict"].format(verdict=verdict, layer=layer, **word))
    else:
        st.info(TEXT["needs_stats"])

    # -- 5. what sparsity costs and buys -----------------------------------------------------------
    st.subheader("5. What sparsity costs and buys, measured")
    dense = models.bundled_model()
    mine, theirs = routing.budget(model), routing.budget(dense.model)
    cells = st.columns(2) + st.columns(2) if presenter else st.columns(4)  # projector-sized numbers: two a row
    for cell, (label, value, delta) in zip(cells, moe_text.budget_metrics(mine, theirs)):
        cell.metric(label, value, delta, delta_color="off")
    tied = " " + TEXT["tied"] if mine.tied_embeddings else ""
    dense_mb, dense_millions = theirs.bytes_read_per_token / 1e6, theirs.total_parameters / 1e6
    said = dict(dtype=info.dtype, k=shape.k, tied=tied, dense=dense.info.name, dense_mb=dense_mb)
    caption("exact", TEXT["budget_caption"].format(**said, dense_millions=dense_millions))
    pair = stored.trained_pair(stored.training_stats(folder), dense_meta)
    if stats is not None and pair is not None and info.name != dense.info.name:
        rows = stored.sparsity_rows(pair, info.name, dense.info.name, mine, theirs)
        chart(mf.sparsity_figure(rows, TEXT["quality_title"], presenter), key="moe_sparsity")
        caption("measured", TEXT["sparsity_caption"].format(tokens=pair.tokens_seen))
        st.markdown(moe_text.trained_finding(pair))
        experiments = stored.experiments_table(stats)
        st.markdown(TEXT["experiments_heading"])
        chart(mf.experiments_figure(experiments, presenter), key="moe_experiments")
        shown = experiments.rename(columns={"name": "routing", "k": "experts per token", "bits_per_byte": "bits/byte"})
        table(shown, "moe_experiments_table", **{"bits/byte": "%.4f"})
        caption("measured", TEXT["experiments_caption"].format(stories=stats["source"]["stories"]))
    else:
        st.info(TEXT["needs_stored_figures"])

    st.markdown("**Measure decode speed here, now**")
    timed = measure_on_click(
        "Time the MoE, its top-1 variant and the dense model",
        "moe_time",
        ("moe_time", info.name),
        lambda progress: expert_work.measure(
            dense.model, model, encode_prompt(tokenizer, expert_work.PROMPT), progress
        ),
        TEXT["timing_not_yet"],
    )
    if timed is not None:
        rows = pd.DataFrame([{"model": k, "decode ms per token": v} for k, v in timed.ms_per_token.items()])
        table(rows, "moe_timed", **{"decode ms per token": "%.2f"})
        caption("measured", TEXT["timed_caption"].format(**vars(timed), dtype=info.dtype))
        st.markdown(moe_text.timed_finding(timed, expert_work.DENSE, expert_work.MOE))

# -- 6. at scale ------------------------------------------------------------------------------------
with st.expander(TEXT["scale_heading"].format(number="6. " if moe_loaded else "")):  # numbered when 1-5 are shown
    design = moe_scale.MoEDesign()
    st.markdown(moe_text.scale_intro(design))
    scale = measure_on_click(
        "Build and measure the three models",
        "moe_scale",
        ("moe", design),
        lambda progress: moe_scale.measure(design, progress=progress),
        TEXT["scale_not_yet"],
    )
    if scale is not None:
        chart(mf.moe_figure(scale, presenter), key="moe_scale_chart")
        caption(
            "measured",
            TEXT["scale_caption"].format(
                repeats=moe_scale.REPEATS,
                prompt_tokens=moe_scale.PROMPT_TOKENS,
                batch_tokens=moe_scale.BATCH_PROMPT_TOKENS,
            ),
        )
        st.markdown(moe_text.scale_findings(scale, design.experts))
with st.expander(TEXT["public_heading"]):
    st.dataframe(
        moe_scale.public_moe_table(load_public_models()),
        hide_index=True,
        key="moe_public",
        column_config={
            c: st.column_config.NumberColumn(name, format=f) for c, (name, f) in moe_scale.PUBLIC_COLUMNS.items()
        },
    )
    caption("published", TEXT["public_caption"])
