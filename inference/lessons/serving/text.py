"""The Serve many page's sentences: format strings in `text.md`, read into one dict (`TEXT`); the functions below
fill them from the data, every comparison word from `measuring.compare`."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from inference.core.measuring import compare
from inference.lessons.serving.replay import RunSummary


def read_sentences(path: Path) -> dict[str, str]:
    """`## key` headings, each followed by one format string: its lines joined by spaces, blank lines kept as
    paragraph breaks (split on spaces and newlines only: a no-break space stays)."""
    parts = re.split(r"^## (.+)$", path.read_text(), flags=re.M)[1:]
    return {
        key.strip(): "\n\n".join(re.sub(r"[ \n]+", " ", p).strip() for p in re.split(r"\n[ ]*\n", body.strip()))
        for key, body in zip(parts[::2], parts[1::2])
    }


TEXT = read_sentences(Path(__file__).with_name("text.md"))
KEPT_UP_SHARE = 0.8  # one slot "kept up" when it streamed at least this share of what the traffic asked for


def ms(value: float) -> str:
    """Milliseconds with enough digits for their size."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def run_name(slots: int, engine: str) -> str:
    """A replay's name: the external engine's (slots 0: unknown), else its slot count."""
    return engine if slots == 0 else TEXT["run_one"] if slots == 1 else TEXT["run_many"].format(slots=slots)


def runs_sentence(summaries: dict[str, RunSummary]) -> str:
    """The comparison chart's text: every run's four panels in one line each."""
    runs = [
        TEXT["run_summary"].format(
            name=name,
            s=s,
            slo=s.slo.describe(),
            **{f"{m}{p}": ms(getattr(s, f"{m}_ms")[p]) for m in ("ttft", "tpot") for p in (50, 95)},
        )
        for name, s in summaries.items()
    ]
    return TEXT["runs_chart"].format(runs="; ".join(runs))


def _tpots_ms(records) -> list[float]:
    return [r.tpot_s * 1000 for r in records if r.tpot_s is not None] or [float("nan")]


def _weights(weight_bytes: float, llc_bytes: int | None) -> dict:
    """Where the weights live, for the sentences that explain a gain or a miss by it."""
    in_cache = bool(llc_bytes and weight_bytes <= llc_bytes)
    return dict(in_cache=in_cache, mb=weight_bytes / 1e6, llc=(llc_bytes or 0) / 2**20, cores=os.cpu_count())


def one_vs_many_verdict(results: dict, slo, weight_bytes: int, llc_bytes: int | None) -> str:
    """The 1-slot vs N replay: the gain, whether one slot kept up with what the trace asked, and what a token cost
    batched against alone, by where the weights live."""
    slots, trace = max(results), results[1].trace
    one, many = results[1].summary(slo), results[slots].summary(slo)
    gain = compare(many.throughput_tokens_per_s, max(one.throughput_tokens_per_s, 1e-9)).words("more", "less")
    text = [TEXT["one_vs_many"].format(slots=slots, one=one, many=many, gain=gain, slo=slo.describe())]
    asked, streamed = trace.asked_tokens_per_s(), results[1].streamed_tokens_per_s()
    if math.isfinite(asked) and asked > 0:
        fields = dict(duration=trace.duration_s, asked=asked, streamed=streamed, share=streamed / asked)
        kept_up = "kept_up" if streamed >= KEPT_UP_SHARE * asked else "fell_behind"
        text.append(TEXT[kept_up].format(window=TEXT["window"].format(**fields)))
    many_tpots, one_tpots = _tpots_ms(results[slots].records), _tpots_ms(results[1].records)
    if all(math.isfinite(v) for v in many_tpots + one_tpots):
        words = compare(many_tpots, one_tpots).words("longer", "shorter")
        where = _weights(weight_bytes, llc_bytes)
        key = "in_cache" if where["in_cache"] else "from_memory"
        text.append(TEXT[key].format(slots=slots, tpot_words=words, one=one, many=many, **where))
    return " ".join(text)


def roofline_verdict(table, weight_bytes: float, llc_bytes: int | None) -> str:
    """Where the roofline's prediction misses at batch 1 and at the largest batch, and the likely reason."""
    first, last = table.iloc[0], table.iloc[-1]
    gains = dict(
        gain_measured=last.measured_tokens_per_s / first.measured_tokens_per_s,
        gain_predicted=last.predicted_tokens_per_s / first.predicted_tokens_per_s,
    )
    where = _weights(weight_bytes, llc_bytes)
    cache = f", more than the {where['llc']:,.0f} MiB cache" if llc_bytes else ""
    why = TEXT["roof_in_cache" if where["in_cache"] else "roof_from_memory"].format(cache=cache, **where)
    return TEXT["roofline_verdict"].format(first=first, last=last, **gains) + " " + why


def engines_verdict(runs: dict, facts: dict, weight_bytes: int, slo) -> str:
    """llama.cpp against vLLM on one trace (both ran); `facts` each engine's `two_engines.scheduler_facts`."""
    llama, other = runs["llama.cpp"], runs["vLLM"]
    a, b = llama.result.summary(slo), other.result.summary(slo)
    fa, fb = facts["llama.cpp"], facts["vLLM"]
    text = []
    if a.throughput_tokens_per_s > 0 and b.throughput_tokens_per_s > 0:
        words = compare(_tpots_ms(llama.result.records), _tpots_ms(other.result.records)).words("longer", "shorter")
        text.append(TEXT["pair_speed"].format(a=a, b=b, tpot_words=words))
    if fa["generated_per_pass"] and fb["generated_per_pass"]:
        text.append(TEXT["pair_batched"].format(a=fa["generated_per_pass"], b=fb["generated_per_pass"]))
    if fa["peak_kv_tokens"] is not None and fb["peak_kv_tokens"] is not None and llama.context and fb["block_size"]:
        cells = dict(cells=llama.context * llama.batch_limit, slots=llama.batch_limit, context=llama.context)
        peaks = dict(a_peak=fa["peak_kv_tokens"], block=fb["block_size"], b_peak=fb["peak_kv_tokens"])
        text.append(TEXT["pair_memory"].format(**cells, **peaks))
    text.append(TEXT["pair_scale"].format(mb=weight_bytes / 1e6))
    return " ".join(text)
