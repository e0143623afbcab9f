"""What the Prefill vs decode page says: one dict of Markdown templates, every number filled in from the sweep, the
timed run, the model's FLOP count, this machine's measured peak or a published config; comparisons of two
measurements worded by `measuring.compare`."""

from __future__ import annotations

from inference.core.measuring import compare
from inference.lessons.prefill_decode.timing import SATURATION, Crossover, GenerationTiming, Sweep, SweepFindings

COMPUTE_BOUND_SHARE = 0.5  # prefill at or above this share of the measured peak counts as close to compute-bound
TEXT = {
    "intro": "A reply is made in two phases. **Prefill** reads the whole prompt in *one* forward pass and gives the "
    "first token. **Decode** then makes every later token with one pass each, feeding in just the token chosen "
    "before. Below: one real generation, timed pass by pass, and a sweep over prompt lengths.",
    "flops": "how busy the arithmetic was in prefill and in decode, against this CPU's measured best",
    "gpu": "why decode on a big model is limited by memory, not arithmetic (illustrative)",
    "table": "medians, quartiles, fastest and slowest run for every prompt length",
    "one_run": "one greedy run after a warm-up",
    "runs": "the {which} of {runs} identical greedy runs after a warm-up",
    "timeline": "Prefill: {prompt:,} prompt tokens in one pass, first token at {ttft:,.0f} ms",
    "timeline_decode": "; decode: {passes}, {median:,.1f} ms each (median), the last ending at {end:,.0f} ms.",
    "timeline_alone": "; no decode pass followed.",
    "remote_caption": "On the engine at {url}: the first block is the engine's own prefill time (its "
    "`timings.prompt_ms`, prompt cache off); later blocks are the gaps between streamed tokens arriving here, each "
    "including one loopback HTTP chunk. Time per output token and decode tokens/s are the engine's own "
    "`predicted_ms` ÷ tokens. Shown: {how}.",
    "local_caption": "Wall time of each step on this machine (forward pass + choosing the token), laid end to end; "
    "hover a block for its token. The dashed line is the time to first token. Shown: {how}.",
    "tpot_help": "The mean of this generation's {steps} decode steps (forward pass + choosing the token), in {how}. "
    "The sweep below times bare forward passes after each prompt instead.",
    "run_vs_sweep": "The run at the top read its {prompt}-token prompt at **{rate:,.0f} tokens/s**, above the sweep's "
    "best of **{best:,.0f}**: the run is {how}, each sweep point the median of {repeats} runs over filler prompts of "
    "other lengths, and on a shared machine two timings of the same pass differ by this much. Neither is wrong; the "
    "sweep's medians are the steadier figure.",
    "sweep_intro": "Prompts of {lengths} tokens. For each: one prefill pass, then {decode} decode passes on the cache "
    "it filled. One warm-up run, then every point is the **median** of several runs; the bars span the middle half "
    "of the runs, so one hiccup of another program on the machine does not stretch them.",
    "time_caption": "Median of {repeats} runs per point after a warm-up; bars span the middle half of the runs "
    "(quartiles). Decode: mean of {decode} one-token passes per run.",
    "rate_caption": "Prefill: prompt tokens ÷ prefill time. Decode: 1 ÷ time per decode pass. Same runs as the chart "
    "on the left. Dotted: the shortest prompt P whose prefill reached {saturation:.0%} of the best rate.",
    "cross_below": "even the shortest prompt here ({shortest} tokens) took longer to prefill",
    "cross_within": "a prompt of about **{tokens:,.0f} tokens** takes as long to prefill",
    "cross_beyond": "**no prompt this model can read takes as long**: the longest measured, {longest} tokens of its "
    "{context:,}-token context, prefilled in {longest_ms:,.0f} ms. The line through the last two points reaches "
    "{reply_ms:,.0f} ms at about {tokens:,.0f} tokens, past the context: an extrapolation, not a prompt this model "
    "could be given",
    "cross_extended": "a prompt of about **{tokens:,.0f} tokens** would take as long to prefill (beyond the longest "
    "measured, {longest}, but within the {context:,}-token context: extended along the last two points, an "
    "extrapolation)",
    "measured": """
**📏 Measured on this machine, in the sweep above:**
- **Prefill is one parallel pass.** Reading {short_tokens} tokens ran at {short_rate:,.0f} tokens/s; longer prompts
  reached up to **{best_rate:,.0f} tokens/s**, and passed {saturation:.0%} of that best at **{saturated} tokens**.
- **Decode is one token per pass**: about **{decode_ms:.1f} ms per token** ({decode_rate:,.0f} tokens/s);
  {short_decode_ms:.1f} ms with {short_tokens} tokens in the cache, {long_decode_ms:.1f} ms with {longest}.
- **The crossover.** One prefill pass over {longest} tokens took {longest_ms:.0f} ms, the cost of
  **{in_steps:.0f} decode steps**; writing those {longest} tokens one by one would take about {one_by_one_s:.1f} s,
  {one_by_one_words} than the one pass. The other way round: decoding the {reply} tokens of the run above takes
  about {reply_ms:,.0f} ms, and {cross}.
""",
    "free_ride": "- Up to **{tokens} prompt tokens**, a whole prefill pass cost no more than two decode steps: those "
    "extra tokens rode along almost free.\n",
    "flops_body": """
**🧮 Computed exactly from the model, divided by the measured times:** a token costs
2 × {matmul:,.2f} M FLOPs in the layers' matrix products (a multiply and an add per weight), plus attention over
every position before it (2 × 2 × {heads} heads × {head_dim} dims per position and layer), and each pass adds the
output layer once (2 × {output:,.2f} M: only the last position's next-token scores are computed).
- Prefill did **{prefill_gflops:,.1f} GFLOP/s** at its best ({prefill_prompt} tokens): **{share:.0%}** of the
  {peak:,.1f} GFLOP/s this CPU reached **on {threads}**, the app's own torch threads that the sweep ran on, in one
  large matrix product ({peak_how}), {verdict}.{elsewhere}
- Decode did {decode_gflops:,.2f} GFLOP/s: the same processor does {gflops_words} arithmetic per second while
  decoding, because each pass has a single token to work on.
- Every decode pass reads all {weight_mb:,.1f} MB of weights for that one token: {bandwidth:,.1f} GB/s if it did
  nothing else.
  {weights_vs_cache}
""",
    "compute_bound": "most of what the arithmetic units can do: prefill is close to compute-bound here",
    "not_compute_bound": "well below it: at these sizes something besides arithmetic (small matrices, moving data, "
    "the Python between operations) still limits prefill here, so it is not compute-bound yet",
    "elsewhere": " (Serve many's roofline measures on all {cpu_threads} CPU threads, as llama-server runs.)",
    "gpu_body": """
**🎨 Illustrative (a made-up GPU, not measured here):** in a big model the weights dominate.
{model} has {weight_gb:,.1f} GB of bfloat16 weights (published config), and a GPU reading memory at {tbps:g} TB/s
needs at least {read_ms:,.0f} ms just to read them once, so it cannot decode faster than about {rate:,.0f} tokens/s
per sequence, however fast it computes. That is why decode on such hardware is called *memory-bandwidth-bound*, and
why serving many sequences at once (batching) helps.
""",
    "sweep_table": "Median, quartiles (q1, q3), fastest (min) and slowest (max) run per prompt length; times in ms.",
}


def run_how(timing: GenerationTiming) -> str:
    """How the timeline's run was chosen, for its caption and metrics."""
    if timing.runs <= 1:
        return TEXT["one_run"]
    return TEXT["runs"].format(which="faster" if timing.runs == 2 else "middle", runs=timing.runs)


def timeline_sentence(timing: GenerationTiming) -> str:
    """The timeline chart as one sentence: the prefill's tokens and first token, the decode passes' count and span."""
    steps, decode = timing.steps, timing.decode_steps
    first = TEXT["timeline"].format(prompt=timing.prompt_tokens, ttft=timing.ttft_ms)
    if not len(decode):
        return first + TEXT["timeline_alone"]
    passes = "1 pass of one token" if len(decode) == 1 else f"{len(decode):,} passes of one token"
    end = float(steps["start_ms"].iloc[-1] + steps["step_ms"].iloc[-1])
    return first + TEXT["timeline_decode"].format(passes=passes, median=float(decode["step_ms"].median()), end=end)


def run_vs_sweep(timing: GenerationTiming, best_prefill_tokens_per_s: float, repeats: int) -> str | None:
    """When the run's prefill rate tops the sweep's best, why the two differ; None when it does not."""
    rate = timing.prefill_tokens_per_s
    if rate <= best_prefill_tokens_per_s:
        return None
    return TEXT["run_vs_sweep"].format(
        prompt=timing.prompt_tokens, rate=rate, best=best_prefill_tokens_per_s, how=run_how(timing), repeats=repeats
    )


def measured_findings(sweep: Sweep, found: SweepFindings, reply: Crossover, context: int) -> str:
    """What the sweep measured: prefill's parallel pass, decode's one token per pass, where they cross."""
    shortest, longest = sweep.summary.iloc[0], sweep.summary.iloc[-1]
    one_by_one_ms = found.longest_prompt * found.decode_ms_per_token
    cross = {"below": "cross_below", "interpolated": "cross_within"}.get(reply.how, "cross_extended")
    if reply.how == "extrapolated" and reply.beyond(context):  # no prompt this model can read takes as long
        cross = "cross_beyond"
    said = TEXT["measured"].format(
        short_tokens=int(shortest.prompt_tokens),
        short_rate=shortest.prefill_tokens_per_s,
        best_rate=found.best_prefill_tokens_per_s,
        saturation=SATURATION,
        saturated=found.saturation_tokens,
        decode_ms=found.decode_ms_per_token,
        decode_rate=1000 / found.decode_ms_per_token,
        short_decode_ms=shortest.decode_ms_per_token,
        long_decode_ms=longest.decode_ms_per_token,
        longest=found.longest_prompt,
        longest_ms=found.longest_prefill_ms,
        in_steps=found.longest_prefill_ms / found.decode_ms_per_token,
        one_by_one_s=one_by_one_ms / 1e3,
        one_by_one_words=compare(one_by_one_ms, found.longest_prefill_ms).words("longer", "shorter"),
        reply=reply.reply_tokens,
        reply_ms=reply.reply_ms,
        cross=TEXT[cross].format(
            shortest=int(shortest.prompt_tokens),
            tokens=reply.prompt_tokens,
            longest=found.longest_prompt,
            context=context,
            longest_ms=found.longest_prefill_ms,
            reply_ms=reply.reply_ms,
        ),  # fmt: skip
    )
    return said + (TEXT["free_ride"].format(tokens=found.free_ride_tokens) if found.free_ride_tokens else "")


def flops_findings(found: SweepFindings, flop_count, info, peak, threads: int, weights_vs_cache: str, cpus: int) -> str:
    """The model's FLOPs divided by the measured times, against this CPU's measured peak (`peak.value`, `peak.how`)
    on `threads` torch threads (the count the peak and the sweep ran on); `cpus` the CPU's threads, which Serve
    many's roofline measures on; `info` the loaded model's heads, head_dim and weight_bytes."""
    share = found.prefill_gflops * 1e9 / peak.value
    return TEXT["flops_body"].format(
        matmul=flop_count.matmul_weights / 1e6,
        heads=info.heads,
        head_dim=info.head_dim,
        output=flop_count.output_weights / 1e6,
        prefill_gflops=found.prefill_gflops,
        prefill_prompt=found.prefill_flops_prompt,
        share=share,
        peak=peak.value / 1e9,
        threads=f"{threads} thread{'s' if threads > 1 else ''}",
        peak_how=peak.how,
        verdict=TEXT["compute_bound" if share >= COMPUTE_BOUND_SHARE else "not_compute_bound"],
        elsewhere=TEXT["elsewhere"].format(cpu_threads=cpus) if cpus != threads else "",
        decode_gflops=found.decode_gflops,
        gflops_words=compare(found.decode_gflops, found.prefill_gflops).words("more", "less"),
        weight_mb=info.weight_bytes / 1e6,
        bandwidth=info.weight_bytes / 1e6 / found.decode_ms_per_token,
        weights_vs_cache=weights_vs_cache,
    )


def illustrative_gpu(model: str, weight_bytes: int, bandwidth_bytes_per_s: float) -> str:
    """A made-up GPU's decode ceiling for a big published model: one read of every weight per token."""
    read_ms = weight_bytes / bandwidth_bytes_per_s * 1000
    return TEXT["gpu_body"].format(
        model=model, weight_gb=weight_bytes / 1e9, tbps=bandwidth_bytes_per_s / 1e12, read_ms=read_ms,
        rate=1000 / read_ms,
    )  # fmt: skip
