"""The Start here page's five live results, from one short run of the loaded model through the step engine: the
prompt's tokens; one pass's probabilities; greedy against a few seeded draws at temperature 1 (each with how often a
draw lands that far down the list, so one unusual seed is not the whole picture); prefill against one decode step,
timed; the KV cache's bytes after the prompt, measured and by the formula."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from inference.core.kv_cache import KVShape
from inference.core.prompting import OPENING_PROMPTS, STORY
from inference.core.run import new_trace, run_greedy, run_uniforms
from inference.core.tokens import readable_token, readable_tokens
from inference.sampling.pipeline import SamplingSettings, draw, seen_mask

PROMPT = OPENING_PROMPTS["start"][STORY].text  # the bundled model's; the page picks the loaded model's
TOP_TOKENS = 3
DRAW_SETTINGS = SamplingSettings(temperature=1.0)  # the model's own distribution, no filter
TIMED_RUNS = 3  # their median is quoted, as every page quotes a timed step
DRAW_SEEDS = 5  # seeds shown drawing the first token: enough to see what is typical and what is rare


@dataclass(frozen=True)
class SeededDraw:
    """One seed's first draw at temperature 1, as the engine makes it (inverse CDF, most likely first)."""

    seed: int
    u: float
    token: str  # readable
    probability: float
    rank: int  # 1 = the most likely
    this_far_down: float  # probability that a draw lands at this rank or further down the list

    @property
    def one_in(self) -> int:
        """How rare a draw this far down is, as "one draw in N"."""
        return max(1, round(1 / self.this_far_down)) if self.this_far_down > 0 else 0


@dataclass(frozen=True)
class FirstLook:
    prompt_tokens: list[str]  # readable, whitespace made visible
    vocab_size: int
    top: list[tuple[str, float]]  # the most likely next tokens and their probabilities (T=1)
    greedy_token: str
    greedy_probability: float
    prefill_ms: float  # one pass over the whole prompt (median of the timed runs)
    decode_ms: float  # one decode step with the prompt in the cache (median of the timed runs)
    timed_runs: int
    cache_tokens: int
    cache_bytes: int  # measured from the cache tensors after the prompt's pass
    kv: KVShape  # what the formula reads: layers, KV heads, head dim, bytes per number
    draws: tuple[SeededDraw, ...]  # seeds `seed`, `seed` + 1, ...: the first is the run's own draw
    half_of_draws_within: int  # the fewest most-likely tokens that together hold half the probability
    half_mass: float  # what those tokens hold together: at least half, often much more (43% + 37.7%)
    short_of_half_mass: float  # what one token fewer holds: less than half

    @property
    def formula_bytes(self) -> int:
        return self.kv.formula_bytes(self.cache_tokens)

    @property
    def formula_is_the_plain_product(self) -> bool:
        """False when sliding windows or a latent (MLA) cache make the formula more than the plain product."""
        kv = self.kv
        return (
            2 * kv.layers * kv.kv_heads * kv.head_dim * self.cache_tokens * kv.bytes_per_element == self.formula_bytes
        )


def first_look(model, tokenizer, prompt_ids: list[int], seed: int = 0, timed_runs: int = TIMED_RUNS) -> FirstLook:
    """One sampled step (T=1, `seed`) for the distribution, the draws and the cache; then `timed_runs` greedy
    two-step runs, each step timed by the engine, the median kept."""
    trace = new_trace(model, tokenizer, prompt_ids, 1, seed=seed, stop_at_eos=False)
    record = trace.step(DRAW_SETTINGS, seed)
    probs = record.logits.double().softmax(-1)
    top = probs.topk(TOP_TOKENS)
    ranked = probs.sort(descending=True).values
    above = torch.cat([torch.zeros(1, dtype=ranked.dtype), ranked.cumsum(0)])  # mass of ranks before r
    seen, draws = seen_mask(prompt_ids, len(probs)), []
    for s in range(seed, seed + DRAW_SEEDS):
        u = float(run_uniforms(s, 1)[0])  # the number a run with this seed draws at its first step
        picked = draw(record.logits, DRAW_SETTINGS, seen, u)
        token = readable_token(tokenizer, picked.token_id)
        far = float(max(0.0, 1 - above[picked.rank]))
        draws.append(SeededDraw(s, u, token, float(probs[picked.token_id]), picked.rank + 1, far))
    half = int((above[1:] < 0.5).sum()) + 1
    runs = [run_greedy(model, tokenizer, prompt_ids, 2, stop_at_eos=False).records for _ in range(timed_runs)]
    return FirstLook(
        prompt_tokens=readable_tokens(tokenizer, prompt_ids),
        vocab_size=len(probs),
        top=list(zip(readable_tokens(tokenizer, top.indices.tolist()), top.values.tolist())),
        greedy_token=readable_token(tokenizer, int(top.indices[0])),
        greedy_probability=float(top.values[0]),
        prefill_ms=statistics.median(r[0].forward_ms for r in runs),
        decode_ms=statistics.median(r[1].forward_ms for r in runs),
        timed_runs=timed_runs,
        cache_tokens=record.cache_tokens,
        cache_bytes=record.cache_bytes,
        kv=trace.kv_shape,
        draws=tuple(draws),
        half_of_draws_within=half,
        half_mass=float(above[half]),
        short_of_half_mass=float(above[half - 1]),
    )
