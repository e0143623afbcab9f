"""Every sentence the Inside page says about its numbers. Plain Markdown; each number is passed in
from the measurement or the arithmetic it describes (`inference.lessons.inside.forward_pass`)."""

from __future__ import annotations

import statistics

import pandas as pd

from inference.core.measuring import Timing
from inference.lessons.glossary import plural
from inference.lessons.inside.forward_pass import PublicShares

LENS_SOURCE = (
    "The logit lens (nostalgebraist, 2020) reads the residual stream after each layer through the model's own "
    "final norm and output layer. Only the last layer was trained to be read that way: a middle row is what that "
    "layer would say through a head trained for the last one, a view, not the layer's own prediction. The tuned "
    "lens (Belrose et al., 2023) trains one small map per layer instead; it is not used here."
)
REMOTE = (
    "A serving engine returns tokens and probabilities, not the hidden states and attention weights inside its "
    "forward pass, so this page runs on the model in this process."
)


SECTIONS = {  # each closed section's one line: what opening it shows
    "public": "where the work goes in a published model, whose shares differ from this small one's",
    "parts": "every part's FLOPs, bytes and measured ms, prefill and decode",
}


def lens_story(token: str, probs: list[float], top_ids: list[int], followed_id: int, role: str) -> str:
    """When the followed token becomes each layer's top guess, and how likely each layer found it."""
    layers = len(probs) - 1
    first = next((i for i, top in enumerate(top_ids) if top == followed_id), None)
    start = f"The {role} **{token}** has probability {probs[0]:.1%} at the embeddings and {probs[-1]:.1%} after the last layer."
    if first is None:
        return start + " It is not the top guess of any layer: the last layer's top token was not drawn."
    if first == 0:
        return start + " It is the top guess from the embeddings on: the token before it alone predicts it."
    return start + f" It first becomes the top guess after layer {first} of {layers}."


def rank_grid_sentence(ranks) -> str:
    """The rank grid (layers x positions; 0 = the top guess) as one sentence: at how many positions the token that
    came next is the top guess of the first, middle and last row, and its median rank there."""
    rows = [[int(r) + 1 for r in row] for row in ranks.tolist()]
    positions = len(rows[0])

    def row_text(layer: int) -> str:
        row = rows[layer]
        where = "read from the embeddings (row 0)" if layer == 0 else f"after layer {layer}"
        return f"{where}, {sum(r == 1 for r in row)} (median rank {statistics.median(row):,.0f})"

    shown = sorted({0, (len(rows) - 1) // 2, len(rows) - 1})
    return (
        f"Positions of {positions} where the token that came next is the top guess (rank 1): "
        + "; ".join(row_text(layer) for layer in shown)
        + "."
    )


def embedding_row(token: str, reads_itself: bool, tied: bool) -> str:
    """Why layer 0's lens so often says the token just read: with tied embeddings it is the token's own row."""
    if not reads_itself:
        return ""
    why = (
        "the output layer is the embedding table itself (tied), and a row scores highest against itself"
        if tied
        else "nothing has mixed in the context yet"
    )
    return f" Row 0 guesses the token just read, **{token}**: {why}."


def grouped_query(heads: int, kv_heads: int, groups: list[list[int]], bytes_per_layer: int, tokens: int) -> str:
    """Which query heads share a K/V head, and what the cache they read weighs (measured from its tensors)."""
    cache = f"This layer's cache holds {plural(tokens, 'token')}: {bytes_per_layer:,} bytes of keys and values (measured from the tensors, the bytes the KV cache page counts)."
    if kv_heads == heads:
        return f"Every one of the {heads} query heads has its own K/V head (multi-head attention). " + cache
    shared = "; ".join(f"heads {g[0]}–{g[-1]} read K/V head {i}" for i, g in enumerate(groups))
    return (
        f"Grouped-query attention: {heads} query heads share {kv_heads} K/V heads ({shared}), so the cache stores "
        f"{kv_heads} keys and values per token instead of {heads}, {heads // kv_heads}× fewer bytes. " + cache
    )


def drawn_cap(positions: list[int], tokens: int, hidden_weight: float) -> str:
    """What the attention chart leaves out: the positions between the first few and the last ones."""
    if len(positions) >= tokens:
        return ""
    gap = [p for p in range(tokens) if p not in set(positions)]
    return (
        f"Drawn: positions {positions[0]}–{gap[0] - 1} (the first tokens: heads often put much weight there) and "
        f"{gap[-1] + 1}–{tokens - 1}; positions {gap[0]}–{gap[-1]} are left out (a chart per head over every "
        f"position gets slow to draw) and hold at most {hidden_weight:.1%} of any head's weight in this layer."
    )


def dominant_part(groups: pd.DataFrame, cpu: str) -> str:
    """Which kind of part took the most measured time in the decode pass, with its share of time and FLOPs."""
    total_ms, total_flops = groups.decode_ms.sum(), groups.flops.sum()
    top = groups.sort_values("decode_ms", ascending=False).iloc[0]
    time_share, flop_share = top.decode_ms / total_ms, top.flops / total_flops
    sentence = (
        f"On this machine ({cpu}), **{top.group}** took the largest share of the decode pass: "
        f"{top.decode_ms:.2f} of {total_ms:.2f} ms ({time_share:.0%}), for {flop_share:.0%} of its FLOPs."
    )
    if time_share > 2 * flop_share:
        sentence += (
            " Its time is out of proportion to its arithmetic: in a model this small each of the pass's many "
            "small operations costs a fixed few microseconds, and those costs, not the FLOPs or the bytes, set "
            "the decode time. In a large model reading the weights dominates instead."
        )
    return sentence


def output_layer_share(groups: pd.DataFrame, vocab: int) -> str:
    out = groups[groups.group == "output layer"].iloc[0]
    return (
        f"The output layer (a {vocab:,}-token vocabulary) is {out.flops / groups.flops.sum():.0%} of this model's "
        f"decode FLOPs and {out.bytes / groups.bytes.sum():.0%} of its weight bytes."
    )


def public_comparison(shares: PublicShares) -> str:
    first, last = 0, len(shares.contexts) - 1
    return (
        f"For **{shares.name}** ({shares.vocab_size:,}-token vocabulary, {shares.hidden_size:,} wide) the output "
        f"layer is {shares.output_share[first]:.0%} of a decode step's FLOPs at {shares.contexts[first]:,} tokens of "
        f"context, and attention over the cache grows from {shares.attention_share[first]:.0%} there to "
        f"{shares.attention_share[last]:.0%} at {shares.contexts[last]:,} tokens."
    )


def walked_vs_plain(walked_ms: float, plain: Timing) -> str:
    """The walked pass's time against the same decode step as one plain forward pass: what differs and why."""
    return (
        f"Walked part by part, this decode pass took **{walked_ms:.2f} ms** in all; the same step as one plain "
        f"forward pass ({plain.what}) took **{plain.median_ms:.2f} ms** (middle half {plain.q1_ms:.2f}–"
        f"{plain.q3_ms:.2f} ms, {plain.how}), the figure other pages time. The walk costs "
        f"{walked_ms / plain.median_ms:.1f}× as much: timing each part stops the clock between parts and runs the "
        "layers one by one in Python, so read the chart for the parts' shares, not for the step's speed."
    )
