"""The Prefill vs decode page's sentences, every number passed in (from the sweep, the timed run, the model's
FLOP count, this machine's measured peak, or a published config)."""

from __future__ import annotations

from inference.lessons.prefill_decode.timing import SATURATION, Crossover, GenerationTiming, Sweep, SweepFindings

SECTIONS = {  # each closed section's one line: what opening it shows
    "flops": "how busy the arithmetic was in prefill and in decode, against this CPU's measured best",
    "gpu": "why decode on a big model is limited by memory, not arithmetic (illustrative)",
    "table": "medians, quartiles, fastest and slowest run for every prompt length",
}
COMPUTE_BOUND_SHARE = 0.5  # prefill at or above this share of the measured peak counts as close to compute-bound


def run_how(timing: GenerationTiming) -> str:
    """How the timeline's run was chosen, for its caption and metrics."""
    n = timing.runs
    if n <= 1:
        return "one greedy run after a warm-up"
    which = "faster" if n == 2 else "middle"
    return f"the {which} of {n} identical greedy runs after a warm-up"


def timeline_sentence(timing: GenerationTiming) -> str:
    """The timeline chart as one sentence with its key numbers: the prefill's tokens and time to first token, then
    the decode passes' count, median and span."""
    steps = timing.steps
    first = f"Prefill: {timing.prompt_tokens:,} prompt tokens in one pass, first token at {timing.ttft_ms:,.0f} ms"
    decode = timing.decode_steps
    if not len(decode):
        return first + "; no decode pass followed."
    end_ms = float(steps["start_ms"].iloc[-1] + steps["step_ms"].iloc[-1])
    passes = "1 pass of one token" if len(decode) == 1 else f"{len(decode):,} passes of one token"
    return (
        f"{first}; decode: {passes}, {float(decode['step_ms'].median()):,.1f} ms each (median), "
        f"the last ending at {end_ms:,.0f} ms."
    )


def tpot_help(timing: GenerationTiming) -> str:
    """What the run's time per output token is: not the sweep's decode pass."""
    steps = len(timing.decode_steps)
    return (
        f"The mean of this generation's {steps} decode steps (forward pass + choosing the token), in "
        f"{run_how(timing)}. The sweep below times bare forward passes after each prompt instead."
    )


def run_vs_sweep(timing: GenerationTiming, best_prefill_tokens_per_s: float, repeats: int) -> str | None:
    """When the run's prefill rate tops the sweep's best, why the two differ; None when it does not."""
    rate = timing.prefill_tokens_per_s
    if rate <= best_prefill_tokens_per_s:
        return None
    return (
        f"The run at the top read its {timing.prompt_tokens}-token prompt at **{rate:,.0f} tokens/s**, above the "
        f"sweep's best of **{best_prefill_tokens_per_s:,.0f}**: the run is {run_how(timing)}, each sweep point the "
        f"median of {repeats} runs over filler prompts of other lengths, and on a shared machine two timings of the "
        "same pass differ by this much. Neither is wrong; the sweep's medians are the steadier figure."
    )


def sweep_intro(lengths: list[int], decode_tokens: int) -> str:
    return (
        f"Prompts of {', '.join(map(str, lengths))} tokens. For each: one prefill pass, then {decode_tokens} decode "
        "passes on the cache it filled. One warm-up run, then every point is the **median** of several runs; the bars "
        "span the middle half of the runs, so one hiccup of another program on the machine does not stretch them."
    )


def crossover_line(
    reply: Crossover, shortest_prompt: int, longest_prompt: int, longest_prefill_ms: float, context: int
) -> str:
    """Which prompt prefills in as long as the reply decodes: measured, extended past the sweep, or (when that
    lands beyond the model's `context`) none this model can read, said as such."""
    if reply.how == "below":
        return f"even the shortest prompt here ({shortest_prompt} tokens) took longer to prefill"
    if reply.how == "interpolated":
        return f"a prompt of about **{reply.prompt_tokens:,.0f} tokens** takes as long to prefill"
    if reply.beyond(context):
        return (
            f"**no prompt this model can read takes as long**: the longest measured, {longest_prompt} tokens of its "
            f"{context:,}-token context, prefilled in {longest_prefill_ms:,.0f} ms. The line through the last two "
            f"points reaches {reply.reply_ms:,.0f} ms at about {reply.prompt_tokens:,.0f} tokens, past the context: "
            "an extrapolation, not a prompt this model could be given"
        )
    return (
        f"a prompt of about **{reply.prompt_tokens:,.0f} tokens** would take as long to prefill (beyond the "
        f"longest measured, {longest_prompt}, but within the {context:,}-token context: extended along the last "
        "two points, an extrapolation)"
    )


def measured_findings(sweep: Sweep, found: SweepFindings, reply: Crossover, context: int) -> str:
    """What the sweep measured: prefill's parallel pass, decode's one token per pass, and where they cross (for the
    loaded model's `context`)."""
    shortest, longest = sweep.summary.iloc[0], sweep.summary.iloc[-1]
    longest_one_by_one_ms = found.longest_prompt * found.decode_ms_per_token
    reply_line = crossover_line(
        reply, int(shortest.prompt_tokens), found.longest_prompt, found.longest_prefill_ms, context
    )
    return f"""
**📏 Measured on this machine, in the sweep above:**
- **Prefill is one parallel pass.** Reading {int(shortest.prompt_tokens)} tokens ran at
  {shortest.prefill_tokens_per_s:,.0f} tokens/s; longer prompts reached up to
  **{found.best_prefill_tokens_per_s:,.0f} tokens/s**, and passed {SATURATION:.0%} of that best at
  **{found.saturation_tokens} tokens**.
- **Decode is one token per pass**: about **{found.decode_ms_per_token:.1f} ms per token**
  ({found.decode_tokens_per_s:,.0f} tokens/s); {shortest.decode_ms_per_token:.1f} ms with
  {int(shortest.prompt_tokens)} tokens in the cache, {longest.decode_ms_per_token:.1f} ms with {found.longest_prompt}.
- **The crossover.** One prefill pass over {found.longest_prompt} tokens took {found.longest_prefill_ms:.0f} ms,
  the cost of **{found.longest_prefill_in_decode_steps:.0f} decode steps**; writing those
  {found.longest_prompt} tokens one by one would take about {longest_one_by_one_ms / 1e3:.1f} s,
  {longest_one_by_one_ms / found.longest_prefill_ms:.0f}× longer. The other way round: decoding the
  {reply.reply_tokens} tokens of the run above takes about {reply.reply_ms:,.0f} ms, and {reply_line}.
""" + (
        f"- Up to **{found.free_ride_tokens} prompt tokens**, a whole prefill pass cost no more than two decode "
        "steps: those extra tokens rode along almost free.\n"
        if found.free_ride_tokens
        else ""
    )


def flops_findings(
    found: SweepFindings,
    flop_count,
    heads: int,
    head_dim: int,
    weight_bytes: int,
    peak,
    threads: int,
    weights_vs_cache: str,
    cpu_threads: int,
) -> str:
    """The model's FLOPs divided by the measured times, against this CPU's measured peak (`peak.value`, `peak.how`)
    on `threads` torch threads (the thread count the peak was measured on, the one the sweep ran on);
    `weights_vs_cache` is machine.weights_vs_cache's sentence for these weights; `cpu_threads` the CPU's threads,
    which Serve many's roofline measures on."""
    elsewhere = (
        f" (Serve many's roofline measures on all {cpu_threads} CPU threads, as llama-server runs.)"
        if cpu_threads != threads
        else ""
    )
    share = found.prefill_flops_per_s / peak.value
    verdict = (
        "most of what the arithmetic units can do: prefill is close to compute-bound here"
        if share >= COMPUTE_BOUND_SHARE
        else "well below it: at these sizes something besides arithmetic (small matrices, moving data, the "
        "Python between operations) still limits prefill here, so it is not compute-bound yet"
    )
    return f"""
**🧮 Computed exactly from the model, divided by the measured times:** a token costs
2 × {flop_count.matmul_weights / 1e6:,.2f} M FLOPs in the layers' matrix products (a multiply and an add per
weight), plus attention over every position before it (2 × 2 × {heads} heads × {head_dim} dims per
position and layer), and each pass adds the output layer once (2 × {flop_count.output_weights / 1e6:,.2f} M: only
the last position's next-token scores are computed).
- Prefill did **{found.prefill_gflops:,.1f} GFLOP/s** at its best ({found.prefill_flops_prompt} tokens): **{share:.0%}**
  of the {peak.value / 1e9:,.1f} GFLOP/s this CPU reached **on {threads} thread{"s" if threads > 1 else ""}**, the
  app's own torch threads that the sweep ran on, in one large matrix product ({peak.how}), {verdict}.{elsewhere}
- Decode did {found.decode_gflops:,.2f} GFLOP/s: the same processor does
  {found.prefill_gflops / found.decode_gflops:,.0f}× less arithmetic per second while decoding, because each pass
  has a single token to work on.
- Every decode pass reads all {weight_bytes / 1e6:,.1f} MB of weights for that one token:
  {weight_bytes / 1e6 / found.decode_ms_per_token:,.1f} GB/s if it did nothing else.
  {weights_vs_cache}
"""


def illustrative_gpu(model_name: str, weight_bytes: int, bandwidth_bytes_per_s: float) -> str:
    """A made-up GPU's decode ceiling for a big published model: one read of every weight per token."""
    read_ms = weight_bytes / bandwidth_bytes_per_s * 1000
    return f"""
**🎨 Illustrative (a made-up GPU, not measured here):** in a big model the weights dominate.
{model_name} has {weight_bytes / 1e9:,.1f} GB of bfloat16 weights (published config), and a GPU reading memory
at {bandwidth_bytes_per_s / 1e12:g} TB/s needs at least {read_ms:,.0f} ms just to read them once, so it cannot decode
faster than about {1000 / read_ms:,.0f} tokens/s per sequence, however fast it computes. That is why decode on such
hardware is called *memory-bandwidth-bound*, and why serving many sequences at once (batching) helps.
"""
