"""What the Inside page says about its numbers: one dict of Markdown templates, filled from the pass by `sentences`."""

from __future__ import annotations

import statistics

from inference.core import measuring
from inference.lessons.glossary import plural
from inference.lessons.inside.forward_pass import Inside, part_groups

TEXT = {
    "lens_source": "The logit lens (nostalgebraist, 2020) reads the residual stream after each layer through the "
    "model's own final norm and output layer. Only the last layer was trained to be read that way: a middle row is "
    "what that layer would say through a head trained for the last one, a view, not the layer's own prediction. The "
    "tuned lens (Belrose et al., 2023) trains one small map per layer instead; it is not used here.",
    "public": "where the work goes in a published model, whose shares differ from this small one's",
    "parts": "every part's FLOPs, bytes and measured ms, prefill and decode",
    "parts_caption": "ms measured; FLOPs and bytes computed exactly (a tied embedding table counts under the output "
    "layer, which reads all of it).",
    "lens": "The {role} **{token}** has probability {first:.1%} at the embeddings and {last:.1%} after the last layer.",
    "lens_never": " It is not the top guess of any layer: the last layer's top token was not drawn.",
    "lens_embeddings": " It is the top guess from the embeddings on: the token before it alone predicts it.",
    "lens_layer": " It first becomes the top guess after layer {layer} of {layers}.",
    "row0_tied": " Row 0 guesses the token just read, **{token}**: the output layer is the embedding table itself "
    "(tied), and a row scores highest against itself.",
    "row0_untied": " Row 0 guesses the token just read, **{token}**: nothing has mixed in the context yet.",
    "ranks": "Positions of {positions} where the token that came next is the top guess (rank 1): {rows}.",
    "rank_row": "{where}, {top} (median rank {median:,.0f})",
    "cache": "This layer's cache holds {tokens}: {bytes:,} bytes of keys and values (measured from the tensors, the "
    "bytes the KV cache page counts).",
    "mha": "Every one of the {heads} query heads has its own K/V head (multi-head attention). ",
    "gqa": "Grouped-query attention: {heads} query heads share {kv_heads} K/V heads ({shared}), so the cache stores "
    "{kv_heads} keys and values per token instead of {heads}, {ratio}× fewer bytes. ",
    "drawn": "Drawn: positions {first}–{gap_start_1} (the first tokens: heads often put much weight there) and "
    "{gap_end_1}–{last}; positions {gap_start}–{gap_end} are left out (a chart per head over every position gets "
    "slow to draw) and hold at most {hidden:.1%} of any head's weight in this layer.",
    "dominant": "On this machine ({cpu}), **{group}** took the largest share of the decode pass: {ms:.2f} of "
    "{total:.2f} ms ({time_share:.0%}), for {flop_share:.0%} of its FLOPs.",
    "out_of_proportion": " Its time is out of proportion to its arithmetic: in a model this small each of the pass's "
    "many small operations costs a fixed few microseconds, and those costs, not the FLOPs or the bytes, set the "
    "decode time. In a large model reading the weights dominates instead.",
    "output_share": " The output layer (a {vocab:,}-token vocabulary) is {flops:.0%} of this model's decode FLOPs and "
    "{bytes:.0%} of its weight bytes.",
    "public_shares": "For **{name}** ({vocab:,}-token vocabulary, {hidden:,} wide) the output layer is {output:.0%} "
    "of a decode step's FLOPs at {first:,} tokens of context, and attention over the cache grows from "
    "{attention_first:.0%} there to {attention_last:.0%} at {last:,} tokens.",
    "timed_vs_plain": "Timed part by part, this decode pass took **{timed:.2f} ms** (median of {repeats}); the same "
    "step as one plain forward pass ({plain.what}) took **{plain.median_ms:.2f} ms** (middle half {plain.q1_ms:.2f}–"
    "{plain.q3_ms:.2f} ms, {plain.how}), the figure other pages time. With a clock around every part the pass took "
    "{words}",
    "clocks_cost": ": reading the clock before and after each of its parts adds to every part, so read the chart "
    "for the parts' shares, not for the step's speed.",
    "clocks_free": ", so the clocks around the parts do not change what the step costs here.",
}
PART_COLUMNS = {  # the parts table's columns as the page shows them
    "name": "part",
    "flops": "decode FLOPs",
    "prefill_flops": "prefill FLOPs",
    "bytes": "weight bytes",
    "read_bytes": "bytes a decode reads",
    "decode_ms": "decode ms",
    "prefill_ms": "prefill ms",
}


def sentences(inside: Inside, name, role: str, tied: bool, cpu: str, vocab: int) -> dict[str, str]:
    """The page's sentences about `inside`, every number from it (`name` turns a token id into text)."""
    probs, layers = inside.followed_probs(), inside.layers
    tops = [inside.lens_top(layer, 1)[0][0] for layer in range(layers + 1)]
    first = next((i for i, top in enumerate(tops) if top == inside.followed_id), None)
    lens = TEXT["lens"].format(role=role, token=name(inside.followed_id), first=probs[0], last=probs[-1])
    lens += {None: TEXT["lens_never"], 0: TEXT["lens_embeddings"]}.get(first, TEXT["lens_layer"]).format(
        layer=first, layers=layers
    )
    if tops[0] == inside.token_ids[-1]:
        lens += TEXT["row0_tied" if tied else "row0_untied"].format(token=name(inside.token_ids[-1]))
    rows = [[int(r) + 1 for r in row] for row in inside.ranks.tolist()]
    shown = sorted({0, (len(rows) - 1) // 2, len(rows) - 1})
    ranks = TEXT["ranks"].format(
        positions=len(rows[0]),
        rows="; ".join(
            TEXT["rank_row"].format(
                where="read from the embeddings (row 0)" if i == 0 else f"after layer {i}",
                top=sum(r == 1 for r in rows[i]),
                median=statistics.median(rows[i]),
            )
            for i in shown
        ),
    )
    groups = part_groups(inside.parts)
    top = groups.sort_values("decode_ms", ascending=False).iloc[0]
    time_share, flop_share = top.decode_ms / groups.decode_ms.sum(), top.flops / groups.flops.sum()
    work = TEXT["dominant"].format(
        cpu=cpu, group=top.group, ms=top.decode_ms, total=groups.decode_ms.sum(), time_share=time_share,
        flop_share=flop_share,
    )  # fmt: skip
    work += TEXT["out_of_proportion"] if time_share > 2 * flop_share else ""
    out = groups[groups.group == "output layer"].iloc[0]
    work += TEXT["output_share"].format(
        vocab=vocab, flops=out.flops / groups.flops.sum(), bytes=out.bytes / groups.bytes.sum()
    )
    said = {"lens": lens, "ranks": ranks, "work": work}
    if inside.plain_decode is not None and len(inside.decode_pass_ms) > 0:
        comparison = measuring.compare(list(inside.decode_pass_ms), inside.plain_decode)
        said["timed_vs_plain"] = (
            TEXT["timed_vs_plain"].format(
                timed=statistics.median(inside.decode_pass_ms),
                repeats=len(inside.decode_pass_ms),
                plain=inside.plain_decode,
                words=comparison.words(more="more time", less="less time"),
            )
            + TEXT["clocks_cost" if comparison.ratio > 1 and not comparison.too_close else "clocks_free"]
        )
    return said


def layer_sentences(inside: Inside, layer: int, drawn: list[int], hidden_weight: float) -> dict[str, str]:
    """The attention section's sentences for `layer`: its heads' K/V groups and cache, what the chart leaves out."""
    heads, kv_heads, groups = inside.heads, len(inside.kv_groups), inside.kv_groups
    cache = TEXT["cache"].format(tokens=plural(inside.context, "token"), bytes=inside.cache_bytes_per_layer[layer])
    shared = "; ".join(f"heads {g[0]}–{g[-1]} read K/V head {i}" for i, g in enumerate(groups))
    template = TEXT["mha" if kv_heads == heads else "gqa"]
    said = {"heads": template.format(heads=heads, kv_heads=kv_heads, shared=shared, ratio=heads // kv_heads) + cache}
    gap = sorted(set(range(inside.context)) - set(drawn))
    said["drawn"] = (
        TEXT["drawn"].format(
            first=drawn[0],
            gap_start_1=gap[0] - 1,
            gap_end_1=gap[-1] + 1,
            last=inside.context - 1,
            gap_start=gap[0],
            gap_end=gap[-1],
            hidden=hidden_weight,
        )  # fmt: skip
        if gap
        else ""
    )
    return said
