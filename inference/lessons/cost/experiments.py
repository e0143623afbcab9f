"""What one answer costs in machine time, measured, and what that makes a million tokens cost.

An answer is one prefill pass over the prompt, then one decode pass per output token. The
prefill pass uses every weight it reads for all P prompt tokens at once; a decode pass reads
every weight again for a single token. So, per token, reading the prompt is cheap and
writing the reply is dear: this module measures by how much, on the model in use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median

from inference.core.measuring import Timing, filler_prompt, pass_timing
from inference.core.run import run_greedy

PREFILL_REPEATS = 3  # prefill passes timed per answer; the median is kept


@dataclass(frozen=True)
class AnswerCost:
    prompt_tokens: int
    reply_tokens: int
    prefill_ms: float  # the one pass over the prompt
    decode_ms: float  # all decode passes together
    step_ms: tuple[float, ...] = field(default=())  # each decode pass, in order (the context one token longer each)

    @property
    def decode_step(self) -> Timing | None:
        """The reply's decode passes as a `Timing` (median, middle half, what was timed); None without them."""
        if len(self.step_ms) < 2:
            return None
        last = self.prompt_tokens + self.reply_tokens - 1
        what = f"one decode step of this reply, at {self.prompt_tokens + 1:,}–{last:,} tokens of context"
        return pass_timing(self.step_ms, what, warmups=1)

    @property
    def total_ms(self) -> float:
        return self.prefill_ms + self.decode_ms

    @property
    def ms_per_input_token(self) -> float:
        return self.prefill_ms / self.prompt_tokens

    @property
    def ms_per_output_token(self) -> float:
        """The first output token comes out of the prefill pass; each later one has its own pass: their median (as
        every page quotes a decode step, `measuring.Timing`), or their mean when the passes were not kept."""
        step = self.decode_step
        return step.median_ms if step is not None else self.decode_ms / max(1, self.reply_tokens - 1)

    @property
    def output_vs_input(self) -> float:
        """How many times more machine time an output token takes than an input token."""
        return self.ms_per_output_token / self.ms_per_input_token

    @property
    def reply_share(self) -> float:
        """The reply's share of all tokens (prompt and reply)."""
        return self.reply_tokens / (self.prompt_tokens + self.reply_tokens)

    @property
    def decode_share(self) -> float:
        return self.decode_ms / self.total_ms

    @property
    def crossover_prompt_tokens(self) -> float:
        """The prompt whose prefill would take as long as this reply's decode passes, if prefill time grew in
        proportion to the prompt at the rate measured here (the Prefill vs decode sweep measures the real curve)."""
        return self.decode_ms / self.ms_per_input_token


def measure_answer(
    model, tokenizer, prompt_tokens: int, reply_tokens: int, prefill_repeats: int = PREFILL_REPEATS
) -> AnswerCost:
    """Time one greedy answer of exactly `reply_tokens` tokens to a `prompt_tokens`-token
    prompt (fixed pseudo-random ids: what they say does not change the arithmetic), with the
    step engine, after an untimed warm-up. The decode time is the sum of that answer's decode
    passes; the prefill time is the median of `prefill_repeats` passes (one short pass is the
    easiest number for a busy moment on the shared machine to distort)."""
    if prompt_tokens < 1 or reply_tokens < 2:
        raise ValueError(f"need at least 1 prompt token and 2 reply tokens, not {prompt_tokens} and {reply_tokens}")
    ids = filler_prompt(model.config.vocab_size, prompt_tokens)
    # Warm-up, untimed: the first pass of a new prompt length pays for setting up kernels.
    run_greedy(model, tokenizer, ids, 2, stop_at_eos=False)
    prefills = [
        run_greedy(model, tokenizer, ids, 1, stop_at_eos=False).records[0].forward_ms
        for _ in range(prefill_repeats - 1)
    ]
    records = run_greedy(model, tokenizer, ids, reply_tokens, stop_at_eos=False).records
    prefills.append(records[0].forward_ms)
    return AnswerCost(
        prompt_tokens=prompt_tokens,
        reply_tokens=len(records),
        prefill_ms=median(prefills),
        decode_ms=sum(r.forward_ms for r in records[1:]),
        step_ms=tuple(r.forward_ms for r in records[1:]),
    )


def cost_per_million_tokens(ms_per_token: float, price_per_hour: float) -> float:
    """What a million tokens cost when the machine costs `price_per_hour` and each token
    takes `ms_per_token` of its time: price per ms x ms per token x 1e6."""
    if price_per_hour < 0 or ms_per_token < 0:
        raise ValueError(f"price per hour and ms per token have to be >= 0, not {price_per_hour} and {ms_per_token}")
    return price_per_hour / 3_600_000 * ms_per_token * 1_000_000
