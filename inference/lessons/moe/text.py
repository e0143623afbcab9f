"""The Mixture of Experts page's sentences, every number passed in (from the model, its stored statistics or a
measurement made on the page)."""

from __future__ import annotations

import pandas as pd

from inference.lessons.glossary import signed
from inference.lessons.moe.experts import DecodeTimes
from inference.lessons.moe.scale import DENSE_ACTIVE, DENSE_TOTAL, MOE, MoEDesign
from inference.lessons.moe.stored import IDLE_SHARE, Balance, TrainedPair, WordInformation

ROUTER_NOISE = 0.10  # decode timings on a shared CPU wobble about this much

INTRO = (
    "A Mixture-of-Experts (MoE) model replaces each layer's MLP with several smaller MLPs, the **experts**, and "
    "a **router**: a tiny layer that scores every expert for every token and sends the token to the best few. "
    "The model **holds** all experts but each token **uses** only a few. This page runs a real MoE trained here "
    "and shows its router at work."
)
CAPTIONS = {  # what each chart and table shows, and how its numbers were obtained
    "heatmap": "Every token (across) in every layer (down), coloured by its first-choice expert; "
    "hover a cell for both kept experts, their renormalised weights and router probabilities. "
    "Experts with the same number in different layers are unrelated.",
    "router": "Router probabilities of this token in this layer (coloured: kept), and the kept "
    "experts' renormalised weights, from the recorded router logits.",
    "balance": "From the trainer's load log (`expert_load_log.json`): the largest and smallest "
    "share of any expert in any layer at each evaluation, over the first 8,192 validation tokens.",
    "public": "Total and active parameters from each model's published config (sources in "
    "assets/public_models.json); GB = parameters × 2 bytes (bfloat16). Read per token: the active "
    "parameters, with one row of the input embedding table instead of all of it (the output layer still "
    "reads its whole matrix). Arithmetic, not measured here.",
}
SECTIONS = {  # each closed section's one line: what opening it shows
    "scale": "dense and MoE models of the same work per token, built here with random weights and timed",
    "public": "total and active parameters of published MoE models, and what a token reads",
}
PROMPT = "Once upon a time, there was a little girl"
QUALITY_TITLE = "Held-out bits/byte (lower: better)"
HELP = {
    "layer": "The layer whose experts colour the text.",
    "token": "Position in the text above (0 = the first prompt token).",
}
NO_STATS = (
    "This model has no stored routing statistics (routing_stats.json, written when a model is bundled): "
    "the shares below are over the text generated above only."
)
NO_LOAD_LOG = "No training load log was kept for this model, so the balance early in training cannot be shown."
NEEDS_STATS = "Needs the stored statistics of a bundled MoE model (routing_stats.json)."
NEEDS_STORED_FIGURES = (
    "Stored quality and speed figures come with a bundled MoE model (routing_stats.json, training_meta.json)."
)
EXPERIMENTS_HEADING = "**Two experiments: route to one expert instead of two, and switch one expert off.**"
TIMING_NOT_YET = "Press the button (about 5–10 s)."
SCALE_NOT_YET = "Press the button (about 10–15 s: builds the three models and times them)."


def intro_verdict(pair: TrainedPair | None, moe_name: str, dense_name: str) -> str:
    """The promise (more knowledge for the same work per token) and what the bundled MoE measured against the dense
    model of the same work: the intro says what the page then shows, never the opposite."""
    promise = "The promise: holding more weights, it can know more for the same work per token."
    if pair is None:
        return f"{promise} Whether a given MoE does is a measurement: section 5 makes it for a bundled MoE."
    said = (
        f"{promise} Measured on the bundled one: **{moe_name}** ({pair.parameters / 1e6:.0f}M parameters, trained "
        f"on about {pair.corpus_bytes / 1e6:.1f} MB of stories) scores **{pair.moe_heldout:.3f}** bits per byte on "
        f"held-out stories, the dense **{dense_name}** scores **{pair.dense_heldout:.3f}** (lower is better): "
    )
    if pair.moe_better:
        return said + "**better**, as promised (section 5 also times it)."
    return said + (
        "**worse**. Its experts had too little text to learn more than one dense MLP does: the trade pays on big "
        "models trained on far more text (section 6 and the published models). Its router and its costs are real, "
        "and section 5 times it."
    )


def no_experts(model_name: str) -> str:
    return (
        f"The loaded model, **{model_name}**, has no experts: every token goes through the same MLP in every "
        "layer, so there is no router to show."
    )


def bundled_moe_missing(folder_name: str) -> str:
    return (
        f"The bundled MoE model is not in this checkout ({folder_name} under assets/models): "
        "train it with `python -m inference.training.train --preset moe`. The section at the end needs no model."
    )


def shape_line(model_name: str, layers: int, experts: int, k: int) -> str:
    return (
        f"**{model_name}**: {layers} layers, each with **{experts} experts**; the router sends "
        f"every token to **{k}** of them, and their outputs are added, weighted by the router."
    )


def chips_caption(layer: int, k: int, routed: int) -> str:
    return (
        f"Layer {layer}: each token's chip is split between the {k} experts the router "
        f"chose, each band as wide as that expert's weight (hover for the numbers). Read from the "
        f"router's own logits on the engine's forward passes: {routed} tokens routed so far; the dashed "
        "chip is the token just chosen, routed when the next step feeds it."
    )


def token_router(
    token: int, text: str, layer: int, experts: int, probs: list[float], kept: list[int], weights: list[float]
) -> str:
    """One token's routing in one layer: its kept experts' probabilities and the renormalised weights. `text`: the
    token as the page shows it in Markdown (quoted and escaped by `core.tokens.markdown_token_text`)."""
    return (
        f"Token {token}, {text}, in layer {layer}: the router gives every expert a "
        f"probability (softmax of its {experts} scores), keeps the top {len(kept)} "
        f"({', '.join(f'expert {e}: {probs[e]:.1%}' for e in kept)}, together "
        f"{sum(probs[e] for e in kept):.1%}) and rescales them to sum to 1: "
        f"**{' + '.join(f'{w:.2f} × expert {e}' for e, w in zip(kept, weights))}**."
    )


def mixture_caption(routed: int, shown: int, width: int) -> str:
    return (
        "Each kept expert's output for this token, times its weight (bars), and their sum "
        "(diamonds): what this layer adds to the token's running vector. Recomputed from the "
        f"layer's input over the {routed} tokens (first {shown} of {width} numbers shown)."
    )


def stored_load_caption(layer: int, tokens: int, stories: int, early_step: int | None) -> str:
    return (
        f"Share of the (token, slot) picks each expert got in layer {layer}, counted over "
        f"{tokens:,} tokens of the {stories:,} stories the trainer held back "
        "(never trained on), stored with the model when it was bundled. "
        + (
            f"Pale bars: the trainer's own count at step {early_step:,} on the first 8,192 validation tokens."
            if early_step is not None
            else ""
        )
    )


def layer_load(layer: int, shares: list[float]) -> str:
    return (
        f"In layer {layer} the busiest expert gets **{max(shares):.1%}** of the picks and the idlest "
        f"**{min(shares):.1%}**; an even split would give each {1 / len(shares):.1%}."
    )


def text_load_caption(layer: int, tokens: int) -> str:
    return f"Share of the picks in layer {layer} over the {tokens} tokens of the text above."


def balance_finding(b: Balance) -> str:
    """What the balance loss did over training, from the trainer's load log."""
    return (
        "**What the balance loss did.** Training adds a small penalty that grows when a few experts take most "
        f"tokens. At step {b.first_step:,} the busiest expert took {b.busiest[0]:.1%} of a layer's picks and "
        f"{b.idle[0]} of the {b.experts_in_all} experts got under {IDLE_SHARE:.0%}; at step {b.last_step:,}: "
        f"{b.busiest[1]:.1%}, and {b.idle[1]} under {IDLE_SHARE:.0%} (even: {b.even_share:.1%} each). "
        + (
            "The penalty did not bring the idle experts back: their parameters are held but almost never used. "
            if b.idle[1]
            else "Every expert gets a share of the work. "
        )
        + "No copy was trained without the penalty or with a stronger one, so what it prevented or could have "
        "done is not measured here."
    )


def top_tokens_caption(expert: int, layer: int, picks: int, tokens: int, k: int, experts: int) -> str:
    return (
        f"The tokens most often routed to expert {expert} in layer {layer} ({picks:,} picks in "
        f"all), counted over the same {tokens:,} validation tokens; 'share sent "
        f"here' = how many of that token's occurrences went to this expert (even: {k}/"
        f"{experts} = {k / experts:.0%})."
    )


def word_verdict(layer: int, info: WordInformation) -> str:
    """Whether the experts specialise by word, from how much the token explains of the expert choice."""
    verdict = (
        "**The word decides much of the choice**, but the lists are word frequencies, not topics: "
        if info.word_decides
        else "**No clean specialisation by word.** "
    )
    return (
        f"{verdict}In layer {layer} the first-choice expert carries {info.expert_entropy_bits:.2f} bits of "
        f"choice; knowing the token explains at most {info.mutual_information_bits:.2f} of them "
        f"({info.share:.0%}; an upper bound, rare tokens inflate it). The rest depends on the context around the "
        "token. The lists above are counts, not meanings: this page gives the experts no names."
    )


def budget_metrics(mine, theirs) -> list[tuple[str, str, str | None]]:
    """(label, value, comparison with the dense model) of the loaded MoE's parameter and byte budget."""
    return [
        (
            "Parameters held",
            f"{mine.total_parameters / 1e6:.1f} M",
            f"{mine.total_parameters / theirs.total_parameters:.1f}× the dense model",
        ),
        (
            "Used per token",
            f"{mine.active_parameters / 1e6:.1f} M",
            f"{mine.active_parameters / theirs.active_parameters:.2f}× the dense model",
        ),
        ("Weights held", f"{mine.bytes_held / 1e6:.1f} MB", None),
        ("Read per token", f"{mine.bytes_read_per_token / 1e6:.1f} MB", None),
    ]


def budget_caption(dtype: str, k: int, mine, dense_name: str, theirs) -> str:
    tied = " (the embedding table again, read whole: the two are tied)" if mine.tied_embeddings else ""
    return (
        f"Counted from the loaded tensors ({dtype}). A decoded token reads one row of the "
        f"embedding table, all attention, norm and router weights, its {k} experts in each layer, and "
        f"the output layer{tied}. "
        f"Dense {dense_name}: {theirs.total_parameters / 1e6:.1f} M parameters, "
        f"{theirs.bytes_read_per_token / 1e6:.1f} MB read per token."
    )


def sparsity_caption(tokens_seen: int) -> str:
    return (
        "Parameters counted from the tensors; held-out bits per byte from each model's training run (the same "
        f"{tokens_seen:,} training tokens seen). Decode speed is not in this chart: it is measured below, on this "
        "machine now, for every model the same way."
    )


def trained_finding(pair: TrainedPair) -> str:
    """The MoE against the dense model as trained: quality and memorisation."""
    return (
        f"At about the same work per token, the MoE scores **{pair.moe_heldout:.3f}** bits per byte on "
        f"held-out stories against the dense model's **{pair.dense_heldout:.3f}** "
        f"({'better' if pair.moe_better else 'worse'}). Memorising: its validation score is "
        f"{signed(pair.moe_gap, 3)} bits/byte off its training score, the dense model's {signed(pair.dense_gap, 3)}"
        + (
            f" — the bigger model memorises more of the {pair.corpus_bytes / 1e6:.1f} MB of stories."
            if pair.moe_memorises_more
            else "."
        )
    )


def experiments_caption(stories: int) -> str:
    return (
        f"Bits per byte on the {stories:,} validation stories with the "
        "stored weights; each variant shares the model's tensors and changes only the router (top-1: "
        "the first choice gets weight 1; expert off: that index, in every layer, never chosen)."
    )


def timed_caption(timed: DecodeTimes, dtype: str) -> str:
    """How the page's own decode timings were made: the one definition of decode speed on this page."""
    return (
        f"On this machine now ({timed.cpu}, {timed.threads} torch thread{'s' if timed.threads != 1 else ''}, shared "
        f"with other visitors and jobs): the median of {timed.repeats} interleaved runs of {timed.steps} greedy "
        "decode steps, each one forward pass of one token through transformers' own forward with a KV cache after a "
        f"{timed.prompt_tokens}-token "
        f"prompt, in {dtype}; the same path for every model. Runs are interleaved so a busy spell slows all alike: "
        "the ratios are steadier than the times. The decode times stored when the model was bundled were taken "
        "while it trained on the same cores, so the page does not show them."
    )


def timed_finding(timed: dict[str, float], dense: str, moe: str, noise: float = ROUTER_NOISE) -> str:
    """The measured MoE / dense ratio, in words."""
    ratio = timed[moe] / timed[dense]
    if abs(ratio - 1) <= noise:
        verdict = f"within {noise:.0%} of the dense model, the timing noise here"
    else:
        verdict = f"{ratio:.2f}× the dense model's time per token"
    return (
        f"Measured now: the MoE ({moe}) took **{timed[moe]:.2f} ms** per token, the dense model "
        f"**{timed[dense]:.2f} ms**: {verdict}."
    )


def section(number: int, title: str, numbered: bool) -> str:
    """A section heading, numbered only when the numbered sections before it are on the page (a dense model shows
    only the last one)."""
    return f"{number}. {title}" if numbered else title


def scale_heading(numbered: bool) -> str:
    """Section 6's closed heading, with its one line."""
    return f"{section(6, 'At scale: the same trade on bigger models (random weights)', numbered)}: {SECTIONS['scale']}"


def scale_intro(design: MoEDesign) -> str:
    return (
        f"Three models built here from configs, equal except for their feed-forward blocks "
        f"({design.layers} layers, hidden size {design.hidden}):\n"
        f"- **{DENSE_ACTIVE}**: one MLP {design.expert_width * design.experts_per_token:,} wide, as many weights "
        f"as the MoE model uses per token;\n"
        f"- **{MOE}** (Mixtral layout): {design.experts} expert MLPs {design.expert_width:,} wide, "
        f"and a router that sends each token to {design.experts_per_token} of them in every layer;\n"
        f"- **{DENSE_TOTAL}**: one MLP {design.expert_width * design.experts:,} wide, as many weights as all "
        "experts."
    )


def scale_caption(repeats: int, prompt_tokens: int, batch_prompt_tokens: int) -> str:
    return (
        "Random weights from a private seed (they produce nonsense text, which does not change "
        f"speed or memory). Bytes from the weight tensors; times are medians of {repeats} interleaved runs: "
        f"prefill of {prompt_tokens} tokens; decode per token for one sequence; decode pass for a batch "
        f"of {batch_prompt_tokens}-token prompts."
    )


def router_cost(ratio: float, noise: float = ROUTER_NOISE) -> str:
    """What the measured MoE / small-dense decode ratio says about routing, within the timing noise."""
    if ratio > 1 + noise:
        return f"the router and gathering the chosen experts cost {ratio - 1:.0%} on top, measured"
    if ratio < 1 - noise:
        return "faster, which can only be timing noise on a shared machine"
    return f"within {noise:.0%} of it, the timing noise here: routing cost too little to see"


def scale_findings(scale: pd.DataFrame, experts: int) -> str:
    """What the three random-weight models measured say: memory follows total parameters, time active ones,
    and a batch reads more experts."""
    rows = scale.set_index("model")
    moe, big = rows.loc[MOE], rows.loc[DENSE_TOTAL]
    return (
        f"The MoE model holds **{moe['memory_vs_dense_active']:.1f}×** the weights of the small dense "
        f"model ({moe['total_parameters'] / 1e6:,.1f} M parameters, like the big one), but a token "
        f"uses only {moe['active_parameters'] / 1e6:,.1f} M of them, so decoding took "
        f"**{moe['decode_ms_per_token']:.1f} ms** per token: "
        f"{moe['decode_vs_dense_active']:.2f}× the small model "
        f"({router_cost(moe['decode_vs_dense_active'])}), against "
        f"{big['decode_vs_dense_active']:.2f}× for the big dense one. You pay memory for total "
        "parameters and time for active ones.\n\n"
        f"**Batches blur it.** With {int(moe['batch'])} sequences in one pass, different tokens pick "
        f"different experts: the router picked {moe['experts_read_in_batch']:.1f} of {experts} "
        f"experts per layer in one pass (alone: {moe['experts_read_alone']:.0f}), and every picked "
        f"expert's weights are read. The MoE pass took "
        f"**{moe['batch_ms_per_pass']:.1f} ms**, {moe['batch_vs_dense_active']:.2f}× the small "
        f"model (the big dense one: {big['batch_vs_dense_active']:.2f}×)."
    )
