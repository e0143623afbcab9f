"""The Mixture of Experts page's sentences: format strings in `text.md`, read into one dict (`TEXT`); the functions
below fill the ones that need more than a field or two, every comparison word from `measuring.compare`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from inference.core.measuring import compare
from inference.lessons.glossary import signed
from inference.lessons.moe.experts import DecodeTimes
from inference.lessons.moe.scale import DENSE_ACTIVE, DENSE_TOTAL, MOE, MoEDesign
from inference.lessons.moe.stored import TrainedPair
from inference.lessons.text_md import read_text_md

TEXT = read_text_md(Path(__file__).with_name("text.md"))
PROMPT = "Once upon a time, there was a little girl"
HELP = {
    "layer": "The layer whose experts colour the text.",
    "token": "Position in the text above (0 = the first token).",
}
BITS = dict(more="more bits per byte (worse)", less="fewer bits per byte (better)", same="about the same bits per byte")
TIME = dict(more="slower", less="faster", same="about the same speed")


def intro_verdict(pair: TrainedPair | None, moe_name: str, dense_name: str) -> str:
    """The promise, and what the bundled MoE measured against the dense model of the same work per token."""
    if pair is None:
        return f"{TEXT['promise']} {TEXT['promise_unmeasured']}"
    verdict = compare(pair.moe_heldout, pair.dense_heldout)
    measured = TEXT["promise_measured"].format(
        moe=moe_name,
        dense=dense_name,
        millions=pair.parameters / 1e6,
        corpus_mb=pair.corpus_bytes / 1e6,
        moe_bpb=pair.moe_heldout,
        dense_bpb=pair.dense_heldout,
        words=verdict.words(**BITS),
    )
    outcome = TEXT["promise_kept"] if verdict.ratio < 1 else TEXT["promise_broken"]
    return f"{TEXT['promise']} {measured} {outcome}"


def token_router(token: int, text: str, layer: int, probs, kept: list[int], weights) -> str:
    """One token's routing in one layer. `text`: the token as Markdown (`core.tokens.markdown_token_text`)."""
    return TEXT["token_router"].format(
        token=token,
        text=text,
        layer=layer,
        experts=len(probs),
        k=len(kept),
        kept=", ".join(f"expert {e}: {probs[e]:.1%}" for e in kept),
        together=sum(probs[e] for e in kept),
        mix=" + ".join(f"{w:.2f} × expert {e}" for e, w in zip(kept, weights)),
    )


def budget_metrics(mine, theirs) -> list[tuple[str, str, str | None]]:
    """(label, value, comparison with the dense model) of the loaded MoE's parameter and byte budget."""
    held = compare(mine.total_parameters, theirs.total_parameters).words("more than dense", "fewer than dense")
    used = compare(mine.active_parameters, theirs.active_parameters).words("more than dense", "fewer than dense")
    return [
        ("Parameters held", f"{mine.total_parameters / 1e6:.1f} M", held),
        ("Used per token", f"{mine.active_parameters / 1e6:.1f} M", used),
        ("Weights held", f"{mine.bytes_held / 1e6:.1f} MB", None),
        ("Read per token", f"{mine.bytes_read_per_token / 1e6:.1f} MB", None),
    ]


def trained_finding(pair: TrainedPair) -> str:
    return TEXT["trained"].format(
        moe_bpb=pair.moe_heldout,
        dense_bpb=pair.dense_heldout,
        words=compare(pair.moe_heldout, pair.dense_heldout).words(**BITS),
        moe_gap=signed(pair.moe_gap, 3),
        dense_gap=signed(pair.dense_gap, 3),
        memorises=" " + TEXT["memorises_more"].format(corpus_mb=pair.corpus_bytes / 1e6)
        if pair.moe_gap > pair.dense_gap
        else ".",
    )


def timed_finding(timed: DecodeTimes, dense: str, moe: str) -> str:
    ms = timed.ms_per_token
    words = compare(timed.runs[moe], timed.runs[dense]).words(**TIME)
    return TEXT["timed"].format(moe=moe, moe_ms=ms[moe], dense_ms=ms[dense], words=f"{words} than the dense model")


def scale_intro(design: MoEDesign) -> str:
    return TEXT["scale_intro"].format(
        layers=design.layers,
        hidden=design.hidden,
        small=DENSE_ACTIVE,
        small_width=design.expert_width * design.experts_per_token,
        moe=MOE,
        experts=design.experts,
        width=design.expert_width,
        k=design.experts_per_token,
        big=DENSE_TOTAL,
        big_width=design.expert_width * design.experts,
    )


def scale_findings(scale: pd.DataFrame, experts: int) -> str:
    """Memory follows total parameters, time active ones, and a batch reads more experts."""
    rows = scale.set_index("model")
    moe, small, big = rows.loc[MOE], rows.loc[DENSE_ACTIVE], rows.loc[DENSE_TOTAL]
    vs_small = compare(moe["decode_ms_runs"], small["decode_ms_runs"])
    one = TEXT["scale_findings"].format(
        memory=compare(moe["weight_bytes"], small["weight_bytes"]).words("more", "less"),
        total=moe["total_parameters"] / 1e6,
        active=moe["active_parameters"] / 1e6,
        moe_ms=moe["decode_ms_per_token"],
        vs_small=vs_small.words(**TIME),
        router=TEXT["router_cost"] if not vs_small.too_close and vs_small.ratio > 1 else "",
        big_ratio=big["decode_vs_dense_active"],
    )
    batches = TEXT["batches"].format(
        batch=int(moe["batch"]),
        in_batch=moe["experts_read_in_batch"],
        experts=experts,
        alone=moe["experts_read_alone"],
        batch_ms=moe["batch_ms_per_pass"],
        batch_ratio=moe["batch_vs_dense_active"],
        big_batch_ratio=big["batch_vs_dense_active"],
    )
    return f"{one}\n\n{batches}"
