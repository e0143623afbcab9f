"""Mixture of Experts: which experts real tokens go to, how evenly, and what sparsity costs and buys."""

import json

import pandas as pd
import streamlit as st

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from inference.core import routing
from inference.core.calculator import load_public_models
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.core.run import SEED_MAX, new_trace
from inference.core.tokens import token_text
from inference.lessons.moe.figures import (
    balance_over_training,
    experiments_figure,
    expert_legend,
    load_figure,
    mixture_figure,
    moe_figure,
    router_figure,
    routing_chips,
    routing_heatmap,
    sparsity_figure,
)
from inference.lessons.moe.scale import (
    BATCH_PROMPT_TOKENS,
    DENSE_ACTIVE,
    DENSE_TOTAL,
    MOE,
    REPEATS,
    MoEDesign,
    public_moe_table,
)
from inference.lessons.moe.scale import PROMPT_TOKENS as RANDOM_PROMPT_TOKENS
from inference.lessons.moe.scale import measure as measure_random_moe
from inference.sampling.pipeline import SamplingSettings

TRACE_KEY = "moe_trace"
INPUTS_KEY = "moe_mlp_inputs"  # (token ids, [layers, tokens, hidden]): recomputed only when the text changes
ROUTER_NOISE = 0.10  # decode timings on a shared CPU wobble about this much
TIMING_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
IDLE_SHARE = 0.01  # an expert with less than this share of a layer's picks is counted as idle

limits = models.limits()
loaded = current_model()
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
presenter = layout.presenter()

st.title("🧩 Mixture of Experts")
st.markdown(
    "A Mixture-of-Experts (MoE) model replaces each layer's MLP with several smaller MLPs, the **experts**, and "
    "a **router**: a tiny layer that scores every expert for every token and sends the token to the best few. "
    "The model **holds** all experts but each token **uses** only a few, so it can know more for the same "
    "work per token. This page runs a real MoE trained here and shows its router at work."
)


def model_folder():
    """The loaded model's folder, where its stored routing statistics live (None for hub models)."""
    from pathlib import Path

    source = st.session_state.get(models.MODEL_SOURCE_KEY, "")
    folder = Path(source) if source else BUNDLED_MODEL_DIR
    return folder if folder.is_dir() else None


def read_url_index(param: str, key: str, upper: int, what: str) -> list[str]:
    """Once per session: a layer or expert index from the URL into its widget, clamped to 0..upper."""
    flag = f"{key}_url_read"
    if st.session_state.get(flag) or param not in st.query_params:
        return []
    st.session_state[flag] = True
    raw = st.query_params[param]
    try:
        value = int(raw)
    except ValueError:
        return [f"`{param}={raw[:20]}` in the link is not a whole number; showing {what} 0."]
    clamped = min(max(value, 0), upper)
    st.session_state[key] = clamped
    return (
        []
        if clamped == value
        else [f"`{param}={value}` is outside {what}s 0–{upper} of this model; showing {what} {clamped}."]
    )


# -- a dense model: nothing to route ------------------------------------------------------------
if not routing.has_experts(model):
    st.info(
        f"The loaded model, **{info.name}**, has no experts: every token goes through the same MLP in every "
        "layer, so there is no router to show."
    )
    if routing.BUNDLED_MOE_DIR.is_dir():
        if st.button(
            f"Load the bundled MoE model ({routing.BUNDLED_MOE_NAME})", key="moe_load_bundled", type="primary"
        ):
            st.session_state[models.MODEL_SOURCE_KEY] = str(routing.BUNDLED_MOE_DIR)
            st.session_state.pop(models.MODEL_ERROR_KEY, None)
            st.rerun()
    else:
        st.warning(
            f"The bundled MoE model is not in this checkout ({routing.BUNDLED_MOE_DIR.name} under assets/models): "
            "train it with `python -m inference.training.train --preset moe`. The section at the end needs no model."
        )
    moe_loaded = False
else:
    moe_loaded = True

if moe_loaded:
    shape = routing.ExpertShape.of(model)
    problems = read_url_index("layer", "moe_layer", shape.layers - 1, "layer") + read_url_index(
        "expert", "moe_expert", shape.experts - 1, "expert"
    )
    for problem in problems:
        st.warning(problem)
    folder = model_folder()
    stats = routing.read_stats(folder) if folder else None
    load_log = routing.read_load_log(folder) if folder else None

    st.markdown(
        f"**{info.name}**: {shape.layers} layers, each with **{shape.experts} experts**; the router sends "
        f"every token to **{shape.k}** of them, and their outputs are added, weighted by the router."
    )

    # -- 1. routing, live ---------------------------------------------------------------------
    st.subheader("1. Routing, live: which experts each token goes to")
    left, right = st.columns([3, 2])
    left.text_input("Prompt", "Once upon a time, there was a little girl", key="moe_prompt", max_chars=2000)
    r = right.columns(2)
    r[0].slider("Temperature", 0.0, 1.5, 0.8, step=0.05, key="moe_temperature", help="0 = greedy.")
    r[1].number_input("Seed", 0, SEED_MAX, 0, key="moe_seed")
    b = st.columns(3)
    step_clicked = b[0].button("Step", key="moe_step", type="primary", width="stretch")
    play_clicked = b[1].button("Play", key="moe_play", width="stretch")
    reset_clicked = b[2].button("Reset", key="moe_reset", width="stretch")
    # A model with fewer layers or experts than the last one keeps the widgets in range.
    st.session_state["moe_layer"] = min(int(st.session_state.get("moe_layer", 0)), shape.layers - 1)
    st.session_state["moe_expert"] = min(int(st.session_state.get("moe_expert", 0)), shape.experts - 1)
    if shape.layers > 1:
        layer = st.slider(
            "Layer", 0, shape.layers - 1, key="moe_layer", help="The layer whose experts colour the text."
        )
    else:
        layer = 0

    settings = SamplingSettings(temperature=float(st.session_state.moe_temperature))
    prompt_ids = encode_prompt(tokenizer, st.session_state.moe_prompt or " ")
    max_new = min(60, limits.max_new_tokens, info.context - len(prompt_ids) - 1)
    run_key = (info.name, tuple(prompt_ids), int(st.session_state.moe_seed))
    trace = st.session_state.get(TRACE_KEY)
    if max_new < 1:
        st.warning(f"The prompt has {len(prompt_ids)} tokens; this model's context holds {info.context}. Shorten it.")
    elif trace is None or reset_clicked or st.session_state.get("moe_run_key") != run_key:
        trace = new_trace(model, tokenizer, prompt_ids, max_new, int(st.session_state.moe_seed))
        st.session_state[TRACE_KEY], st.session_state["moe_run_key"] = trace, run_key

    if trace is not None:
        with generation_slot():
            if step_clicked or not trace.records:  # the first step routes the prompt: show it at once
                trace.step(settings)
    chips_box = st.empty()

    def show_chips():
        recorded = routing.trace_routing(trace)
        experts, weights = recorded.chosen()
        texts = [token_text(tokenizer, t) for t in recorded.token_ids]
        pending = trace.records[-1].token_text if trace.records else None
        chips_box.markdown(
            routing_chips(texts, experts[layer].tolist(), weights[layer].tolist(), pending, presenter),
            unsafe_allow_html=True,
        )

    if trace is not None and play_clicked:
        while not trace.finished:
            with generation_slot():
                trace.step(settings)
            show_chips()

    recorded = routing.trace_routing(trace) if trace is not None else None
    if recorded is not None:
        show_chips()
        st.markdown(expert_legend(shape.experts, presenter), unsafe_allow_html=True)
        fed = len(recorded.token_ids)
        caption(
            "exact",
            f"Layer {layer}: each token's chip is split between the {shape.k} experts the router "
            f"chose, each band as wide as that expert's weight (hover for the numbers). Read from the "
            f"router's own logits on the engine's forward passes: {fed} tokens routed so far; the dashed "
            "chip is the token just chosen, routed when the next step feeds it.",
        )
        experts, weights = recorded.chosen()
        texts = [token_text(tokenizer, t) for t in recorded.token_ids]
        st.plotly_chart(
            routing_heatmap(texts, experts, weights, recorded.probabilities, presenter),
            width="stretch",
            key="moe_heatmap",
        )
        caption(
            "exact",
            "Every token (across) in every layer (down), coloured by its first-choice expert; "
            "hover a cell for both kept experts, their renormalised weights and router probabilities. "
            "Experts with the same number in different layers are unrelated.",
        )

        # -- 2. one token's router -----------------------------------------------------------
        st.subheader("2. One token's router")
        if st.session_state.get("moe_token_fed") != (run_key, fed) or st.session_state.get("moe_token", 0) >= fed:
            # The text grew (Step, Play) or changed: show the newest routed token. (The slider's range
            # changes with it, and Streamlit would otherwise reset it to token 0.)
            st.session_state["moe_token"] = fed - 1
            st.session_state["moe_token_fed"] = (run_key, fed)
        token = (
            st.slider(
                "Token", 0, fed - 1, key="moe_token", help="Position in the text above (0 = the first prompt token)."
            )
            if fed > 1
            else 0
        )
        probs = recorded.probabilities[layer, token].tolist()
        kept, kept_weights = experts[layer, token].tolist(), weights[layer, token].tolist()
        st.markdown(
            f"Token {token}, `{texts[token]!r}`, in layer {layer}: the router gives every expert a "
            f"probability (softmax of its {shape.experts} scores), keeps the top {shape.k} "
            f"({', '.join(f'expert {e}: {probs[e]:.1%}' for e in kept)}, together "
            f"{sum(probs[e] for e in kept):.1%}) and rescales them to sum to 1: "
            f"**{' + '.join(f'{w:.2f} × expert {e}' for e, w in zip(kept, kept_weights))}**."
        )
        st.plotly_chart(router_figure(probs, kept, kept_weights, presenter), width="stretch", key="moe_router")
        caption(
            "exact",
            "Router probabilities of this token in this layer (coloured: kept), and the kept "
            "experts' renormalised weights, from the recorded router logits.",
        )
        ids_now = tuple(recorded.token_ids)
        cached = st.session_state.get(INPUTS_KEY)
        if cached is None or cached[0] != (info.name, ids_now):
            with generation_slot():
                st.session_state[INPUTS_KEY] = ((info.name, ids_now), routing.mlp_inputs(model, list(ids_now)))
        mix = routing.mixture(model, st.session_state[INPUTS_KEY][1][layer, token], layer)
        st.plotly_chart(
            mixture_figure(mix.experts, mix.weights, mix.outputs, mix.mixture, presenter=presenter),
            width="stretch",
            key="moe_mixture",
        )
        caption(
            "exact",
            "Each kept expert's output for this token, times its weight (bars), and their sum "
            "(diamonds): what this layer adds to the token's running vector. Recomputed from the "
            f"layer's input over the {fed} tokens (first {min(24, len(mix.mixture))} of "
            f"{len(mix.mixture)} numbers shown).",
        )

    # -- 3. load ------------------------------------------------------------------------------
    st.subheader("3. Load: does every expert get work?")
    uniform = 1 / shape.experts
    if stats is not None:
        final = stats["load"]["fractions"][layer]
        source = stats["source"]
        final_label = f"validation stories ({source['tokens']:,} tokens)"
        early_row = load_log[0] if load_log else None
        st.plotly_chart(
            load_figure(
                final,
                early_row["fractions"][layer] if early_row else None,
                shape.k,
                layer,
                early_row["step"] if early_row else None,
                final_label,
                presenter,
            ),
            width="stretch",
            key="moe_load",
        )
        caption(
            "exact",
            f"Share of the (token, slot) picks each expert got in layer {layer}, counted over "
            f"{source['tokens']:,} tokens of the {source['stories']:,} stories the trainer held back "
            f"(never trained on), stored with the model when it was bundled. "
            + (
                f"Pale bars: the trainer's own count at step {early_row['step']:,} on the first 8,192 "
                "validation tokens."
                if early_row
                else ""
            ),
        )
        st.markdown(
            f"In layer {layer} the busiest expert gets **{max(final):.1%}** of the picks and the idlest "
            f"**{min(final):.1%}**; an even split would give each {uniform:.1%}."
        )
    else:
        counts = recorded.counts()[layer] if trace is not None and recorded is not None else None
        st.info(
            "This model has no stored routing statistics (routing_stats.json, written when a model is bundled): "
            "the shares below are over the text generated above only."
        )
        if counts is not None:
            share = (counts.double() / counts.sum()).tolist()
            st.plotly_chart(
                load_figure(share, None, shape.k, layer, None, "this text", presenter), width="stretch", key="moe_load"
            )
            caption(
                "exact",
                f"Share of the picks in layer {layer} over the {len(recorded.token_ids)} tokens of the text above.",
            )
    if load_log:
        st.plotly_chart(balance_over_training(load_log, presenter), width="stretch", key="moe_balance")
        first, last = load_log[0], load_log[-1]
        busiest = [max(max(r) for r in row["fractions"]) for row in (first, last)]
        caption(
            "exact",
            "From the trainer's load log (`expert_load_log.json`): the largest and smallest "
            "share of any expert in any layer at each evaluation, over the first 8,192 validation tokens.",
        )
        idle = [sum(f < IDLE_SHARE for r in row["fractions"] for f in r) for row in (first, last)]
        slots = shape.layers * shape.experts
        st.markdown(
            f"**What the balance loss did.** Training adds a small penalty that grows when a few experts take most "
            f"tokens. At step {first['step']:,} the busiest expert took {busiest[0]:.1%} of a layer's picks and "
            f"{idle[0]} of the {slots} experts got under {IDLE_SHARE:.0%}; at step {last['step']:,}: {busiest[1]:.1%}, "
            f"and {idle[1]} under {IDLE_SHARE:.0%} (even: {uniform:.1%} each). "
            + (
                "The penalty did not bring the idle experts back: their parameters are held but almost never used. "
                if idle[1]
                else "Every expert gets a share of the work. "
            )
            + "No copy was trained without the penalty or with a stronger one, so what it prevented or could have "
            "done is not measured here."
        )
    elif stats is not None:
        st.caption("No training load log was kept for this model, so the balance early in training cannot be shown.")

    # -- 4. what the experts learned ------------------------------------------------------------
    st.subheader("4. What the experts learned")
    expert = st.selectbox(
        "Expert",
        list(range(shape.experts)),
        key="moe_expert",  # kept in range above
        format_func=lambda e: f"expert {e}",
    )
    if stats is not None:
        rows = stats["top_tokens"][layer][expert]
        picks = stats["load"]["counts"][layer][expert]
        table = pd.DataFrame(
            [
                {
                    "token": repr(r["token"]),
                    "times routed here": r["count"],
                    "times in the text": r["occurrences"],
                    "share sent here": r["count"] / r["occurrences"],
                }
                for r in rows
            ]
        )
        st.dataframe(
            table,
            hide_index=True,
            width="stretch",
            key="moe_top_tokens",
            column_config={
                "share sent here": st.column_config.ProgressColumn(format="percent", min_value=0, max_value=1)
            },
        )
        caption(
            "exact",
            f"The tokens most often routed to expert {expert} in layer {layer} ({picks:,} picks in "
            f"all), counted over the same {stats['source']['tokens']:,} validation tokens; 'share sent "
            f"here' = how many of that token's occurrences went to this expert (even: {shape.k}/"
            f"{shape.experts} = {shape.k / shape.experts:.0%}).",
        )
        info_row = stats["information"][layer]
        ratio = info_row["mutual_information_bits"] / max(info_row["expert_entropy_bits"], 1e-9)
        verdict = (
            "**No clean specialisation by word.** "
            if ratio < 0.5
            else "**The word decides much of the choice**, but the lists are word frequencies, not topics: "
        )
        st.markdown(
            f"{verdict}In layer {layer} the first-choice expert carries {info_row['expert_entropy_bits']:.2f} bits of "
            f"choice; knowing the token explains at most {info_row['mutual_information_bits']:.2f} of them "
            f"({ratio:.0%}; an upper bound, rare tokens inflate it). The rest depends on the context around the "
            "token. The lists above are counts, not meanings: this page gives the experts no names."
        )
    else:
        st.info("Needs the stored statistics of a bundled MoE model (routing_stats.json).")

    # -- 5. what sparsity costs and buys -----------------------------------------------------------
    st.subheader("5. What sparsity costs and buys, measured")
    dense = models.bundled_model()
    mine, theirs = routing.budget(model), routing.budget(dense.model)
    m = st.columns(4)
    m[0].metric(
        "Parameters held",
        f"{mine.total_parameters / 1e6:.1f} M",
        f"{mine.total_parameters / theirs.total_parameters:.1f}× the dense model",
        delta_color="off",
    )
    m[1].metric(
        "Used per token",
        f"{mine.active_parameters / 1e6:.1f} M",
        f"{mine.active_parameters / theirs.active_parameters:.2f}× the dense model",
        delta_color="off",
    )
    m[2].metric("Weights held", f"{mine.bytes_held / 1e6:.1f} MB")
    m[3].metric("Read per token", f"{mine.bytes_read_per_token / 1e6:.1f} MB")
    caption(
        "exact",
        f"Counted from the loaded tensors ({info.dtype}). A decoded token reads one row of the "
        f"embedding table, all attention, norm and router weights, its {shape.k} experts in each layer, and "
        f"the output layer{' (the embedding table again, read whole: the two are tied)' if mine.tied_embeddings else ''}. "
        f"Dense {dense.info.name}: {theirs.total_parameters / 1e6:.1f} M parameters, "
        f"{theirs.bytes_read_per_token / 1e6:.1f} MB read per token.",
    )
    metas = {}
    for name, path in ((info.name, folder), (dense.info.name, BUNDLED_MODEL_DIR)):
        meta_file = path / "training_meta.json" if path else None
        if meta_file and meta_file.exists():
            metas[name] = json.loads(meta_file.read_text())["stats"]
    if stats is not None and len(metas) == 2:
        ms = stats["decode_ms_per_token"]
        as_trained = stats["experiments"][0]["name"]  # the first row is the model as trained
        q, d = metas[info.name], metas[dense.info.name]
        rows = pd.DataFrame(
            [
                {
                    "model": f"{info.name} (MoE)",
                    "total": mine.total_parameters,
                    "active": mine.active_parameters,
                    "decode_ms": ms[as_trained],
                    "bits_per_byte": q["heldout_bits_per_byte"],
                },
                {
                    "model": f"{dense.info.name} (dense)",
                    "total": theirs.total_parameters,
                    "active": theirs.active_parameters,
                    "decode_ms": ms["dense"],
                    "bits_per_byte": d["heldout_bits_per_byte"],
                },
            ]
        )
        st.plotly_chart(
            sparsity_figure(rows, "Held-out bits per byte (lower: better)", presenter),
            width="stretch",
            key="moe_sparsity",
        )
        caption(
            "measured",
            f"Parameters counted from the tensors; held-out bits per byte from each model's "
            f"training run (the same {q['tokens_seen']:,} training tokens seen). Decode: "
            f"{stats['timing']['how']}; {stats['timing']['machine']}; {stats['timing']['conditions']}.",
        )
        gap_moe = q["val_bits_per_byte"] - q["train_bits_per_byte"]
        gap_dense = d["val_bits_per_byte"] - d["train_bits_per_byte"]
        better = q["heldout_bits_per_byte"] < d["heldout_bits_per_byte"]
        st.markdown(
            f"At about the same work per token, the MoE scores **{q['heldout_bits_per_byte']:.3f}** bits per byte on "
            f"held-out stories against the dense model's **{d['heldout_bits_per_byte']:.3f}** "
            f"({'better' if better else 'worse'}), and decodes at {ms[as_trained]:.2f} ms per token against "
            f"{ms['dense']:.2f} ms through the same code. Memorising: its validation score is {gap_moe:+.3f} bits/byte "
            f"off its training score, the dense model's {gap_dense:+.3f}"
            + (" — the bigger model memorises more of the 6 MB of stories." if gap_moe > gap_dense else ".")
        )
        experiments = pd.DataFrame(
            [
                {
                    "name": e["name"],
                    "k": e["k"],
                    "bits_per_byte": e["val_bits_per_byte"],
                    "decode_ms": ms.get(e["name"]),
                }
                for e in stats["experiments"]
            ]
        )
        st.markdown("**Two experiments: route to one expert instead of two, and switch one expert off.**")
        st.plotly_chart(experiments_figure(experiments, presenter), width="stretch", key="moe_experiments")
        st.dataframe(
            experiments.rename(
                columns={
                    "name": "routing",
                    "k": "experts per token",
                    "bits_per_byte": "validation bits/byte",
                    "decode_ms": "decode ms/token",
                }
            ),
            hide_index=True,
            width="stretch",
            key="moe_experiments_table",
            column_config={
                "validation bits/byte": st.column_config.NumberColumn(format="%.4f"),
                "decode ms/token": st.column_config.NumberColumn(format="%.2f"),
            },
        )
        caption(
            "measured",
            f"Bits per byte on the {stats['source']['stories']:,} validation stories with the "
            "stored weights; each variant shares the model's tensors and changes only the router (top-1: "
            "the first choice gets weight 1; expert off: that index, in every layer, never chosen). "
            f"Decode times as above, for the variants timed.",
        )
    else:
        st.info(
            "Stored quality and speed figures come with a bundled MoE model (routing_stats.json, training_meta.json)."
        )

    st.markdown("**Measure decode speed here, now**")
    timed = measure_on_click(
        "Time the MoE, its top-1 variant and the dense model",
        "moe_time",
        ("moe_time", info.name),
        lambda progress: routing.decode_timings(
            {"dense": dense.model, "MoE, top-2": model, "MoE, top-1": routing.variant(model, k=1)},
            encode_prompt(tokenizer, TIMING_PROMPT),
            repeats=3,
            steps=24,
            progress=progress,
        ),
        "Press the button (about 5–10 s).",
    )
    if timed is not None:
        st.dataframe(
            pd.DataFrame([{"model": k, "decode ms per token": v} for k, v in timed.items()]),
            hide_index=True,
            width="stretch",
            key="moe_timed",
        )
        caption(
            "measured",
            "Median of 3 interleaved runs of 24 greedy decode steps through transformers' "
            "forward with a KV cache, on this machine now (shared with other visitors).",
        )

# -- 6. at scale ------------------------------------------------------------------------------------
st.subheader("6. At scale: the same trade on bigger models (random weights)")
design = MoEDesign()
st.markdown(
    f"Three models built here from configs, equal except for their feed-forward blocks "
    f"({design.layers} layers, hidden size {design.hidden}):\n"
    f"- **{DENSE_ACTIVE}**: one MLP {design.expert_width * design.experts_per_token:,} wide, as many weights as "
    f"the MoE model uses per token;\n"
    f"- **{MOE}** (Mixtral layout): {design.experts} expert MLPs {design.expert_width:,} wide, "
    f"and a router that sends each token to {design.experts_per_token} of them in every layer;\n"
    f"- **{DENSE_TOTAL}**: one MLP {design.expert_width * design.experts:,} wide, as many weights as all experts."
)
scale = measure_on_click(
    "Build and measure the three models",
    "moe_scale",
    ("moe", design),
    lambda progress: measure_random_moe(design, progress=progress),
    "Press the button (about 10–15 s: builds the three models and times them).",
)
if scale is not None:
    st.plotly_chart(moe_figure(scale, presenter), width="stretch", key="moe_scale_chart")
    caption(
        "measured",
        "Random weights from a private seed (they produce nonsense text, which does not change "
        f"speed or memory). Bytes from the weight tensors; times are medians of {REPEATS} interleaved runs: "
        f"prefill of {RANDOM_PROMPT_TOKENS} tokens; decode per token for one sequence; decode pass for a batch "
        f"of {BATCH_PROMPT_TOKENS}-token prompts.",
    )
    rows = scale.set_index("model")

    def router_cost(ratio: float) -> str:
        """What the measured MoE / small-dense decode ratio says about routing, within the timing noise."""
        if ratio > 1 + ROUTER_NOISE:
            return f"the router and gathering the chosen experts cost {ratio - 1:.0%} on top, measured"
        if ratio < 1 - ROUTER_NOISE:
            return "faster, which can only be timing noise on a shared machine"
        return f"within {ROUTER_NOISE:.0%} of it, the timing noise here: routing cost too little to see"

    st.markdown(
        f"The MoE model holds **{rows.loc[MOE, 'memory_vs_dense_active']:.1f}×** the weights of the small dense "
        f"model ({rows.loc[MOE, 'total_parameters'] / 1e6:,.1f} M parameters, like the big one), but a token "
        f"uses only {rows.loc[MOE, 'active_parameters'] / 1e6:,.1f} M of them, so decoding took "
        f"**{rows.loc[MOE, 'decode_ms_per_token']:.1f} ms** per token: "
        f"{rows.loc[MOE, 'decode_vs_dense_active']:.2f}× the small model "
        f"({router_cost(rows.loc[MOE, 'decode_vs_dense_active'])}), against "
        f"{rows.loc[DENSE_TOTAL, 'decode_vs_dense_active']:.2f}× for the big dense one. You pay memory for total "
        "parameters and time for active ones.\n\n"
        f"**Batches blur it.** With {int(rows.loc[MOE, 'batch'])} sequences in one pass, different tokens pick "
        f"different experts: the router picked {rows.loc[MOE, 'experts_read_in_batch']:.1f} of {design.experts} "
        f"experts per layer in one pass (alone: {rows.loc[MOE, 'experts_read_alone']:.0f}), and every picked "
        f"expert's weights are read. The MoE pass took "
        f"**{rows.loc[MOE, 'batch_ms_per_pass']:.1f} ms**, {rows.loc[MOE, 'batch_vs_dense_active']:.2f}× the small "
        f"model (the big dense one: {rows.loc[DENSE_TOTAL, 'batch_vs_dense_active']:.2f}×)."
    )

st.markdown("**Published MoE models**")
public = public_moe_table(load_public_models())
st.dataframe(
    public,
    hide_index=True,
    width="stretch",
    key="moe_public",
    column_config={
        "experts_per_token": st.column_config.NumberColumn("per token"),
        "total_parameters_b": st.column_config.NumberColumn("params (B)", format="%.1f"),
        "active_parameters_b": st.column_config.NumberColumn("active (B)", format="%.1f"),
        "active_share": st.column_config.NumberColumn("active share", format="percent"),
        "memory_gb_bf16": st.column_config.NumberColumn("memory, bf16 (GB)", format="%.1f"),
        "weights_read_per_token_gb_bf16": st.column_config.NumberColumn("read per token (GB)", format="%.1f"),
    },
)
caption(
    "published",
    "Total and active parameters from each model's published config (sources in "
    "assets/public_models.json); GB = parameters × 2 bytes (bfloat16). Read per token: the active "
    "parameters, with one row of the input embedding table instead of all of it (the output layer still "
    "reads its whole matrix). Arithmetic, not measured here.",
)
