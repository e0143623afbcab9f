"""What one answer costs in machine time, measured, and what that makes a million tokens cost.

An answer is one prefill pass over the prompt, then one decode pass per output token: the prefill pass uses every
weight it reads for all P prompt tokens at once, a decode pass reads every weight again for a single token. So per
token, reading the prompt is cheap and writing the reply is dear; this measures by how much, on the model in use.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    step_ms: tuple[float, ...] = ()  # each decode pass, in order (the context one token longer each)

    @property
    def decode_step(self) -> Timing | None:
        """The reply's decode passes as a `Timing`; None without two of them."""
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
        every page quotes a decode step), or their mean when the passes were not kept."""
        step = self.decode_step
        return step.median_ms if step is not None else self.decode_ms / max(1, self.reply_tokens - 1)

    @property
    def output_vs_input(self) -> float:
        return self.ms_per_output_token / self.ms_per_input_token

    @property
    def reply_share(self) -> float:
        return self.reply_tokens / (self.prompt_tokens + self.reply_tokens)

    @property
    def decode_share(self) -> float:
        return self.decode_ms / self.total_ms

    @property
    def crossover_prompt_tokens(self) -> float:
        """The prompt whose prefill would take as long as this reply's decode passes, if prefill time grew in
        proportion to the prompt (the Prefill vs decode sweep measures the real curve)."""
        return self.decode_ms / self.ms_per_input_token


def measure_answer(model, tokenizer, prompt_tokens: int, reply_tokens: int) -> AnswerCost:
    """Time one greedy answer of exactly `reply_tokens` tokens to a `prompt_tokens`-token filler prompt with the step
    engine, after an untimed warm-up: the decode time is the sum of its decode passes, the prefill time the median
    of PREFILL_REPEATS passes (one short pass is the easiest number for a busy moment to distort)."""
    if prompt_tokens < 1 or reply_tokens < 2:
        raise ValueError(f"need at least 1 prompt token and 2 reply tokens, not {prompt_tokens} and {reply_tokens}")
    ids = filler_prompt(model.config.vocab_size, prompt_tokens)
    run_greedy(model, tokenizer, ids, 2, stop_at_eos=False)  # warm-up: a new prompt length sets up kernels
    prefills = [
        run_greedy(model, tokenizer, ids, 1, stop_at_eos=False).records[0].forward_ms
        for _ in range(PREFILL_REPEATS - 1)
    ]
    records = run_greedy(model, tokenizer, ids, reply_tokens, stop_at_eos=False).records
    steps = tuple(r.forward_ms for r in records[1:])
    return AnswerCost(prompt_tokens, len(records), median([*prefills, records[0].forward_ms]), sum(steps), steps)


def cost_per_million_tokens(ms_per_token: float, price_per_hour: float) -> float:
    """What a million tokens cost when the machine costs `price_per_hour` and each token takes `ms_per_token`."""
    return price_per_hour / 3_600_000 * ms_per_token * 1_000_000
