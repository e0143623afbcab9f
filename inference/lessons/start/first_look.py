"""The Start here page's five live results, from one short run of the loaded model.

    1. tokens: the prompt as the model reads it;
    2. one forward pass: a probability for every token of the vocabulary (the top few shown);
    3. the draw: the most likely token (greedy) against seeded draws at temperature 1 (a few seeds, each with how
       often a draw lands that far down the list, so one unusual seed is not the whole picture);
    4. prefill vs decode: the pass over the whole prompt against one decode step, timed;
    5. the KV cache: its bytes after the prompt, read from the cache tensors, and the formula.

Everything comes from the step engine, the same code the deeper pages use.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from inference.core.prompting import OPENING_PROMPTS, STORY
from inference.core.run import new_trace, run_greedy, run_uniforms
from inference.core.tokens import readable_token, readable_tokens
from inference.sampling.pipeline import SamplingSettings, draw, seen_mask

PROMPT = OPENING_PROMPTS["start"][STORY].text  # the bundled model's; the page picks the loaded model's
TOP_TOKENS = 3
DRAW_SETTINGS = SamplingSettings(temperature=1.0)  # the model's own distribution, no filter
TIMED_RUNS = 3  # their median is quoted, as every page quotes a timed step (inference/core/measuring.py)
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
    formula_bytes: int  # 2 x layers x KV heads x head dim x tokens x bytes per number
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_element: int
    draws: tuple[SeededDraw, ...] = ()  # seeds `seed`, `seed` + 1, ...: the first is the run's own draw
    half_of_draws_within: int = 0  # the fewest most-likely tokens that together hold half the probability
    half_mass: float = 0.0  # what those tokens hold together: at least half, often much more (43% + 37.7%)
    short_of_half_mass: float = 0.0  # what one token fewer holds: less than half

    @property
    def prompt_length(self) -> int:
        return len(self.prompt_tokens)

    @property
    def formula_is_the_plain_product(self) -> bool:
        """True unless the model's layers have sliding windows or a latent (MLA) cache, where the
        formula is more than 2 x layers x KV heads x head dim x tokens x bytes."""
        plain = 2 * self.layers * self.kv_heads * self.head_dim * self.cache_tokens * self.bytes_per_element
        return plain == self.formula_bytes


def first_look(model, tokenizer, prompt_ids: list[int], seed: int = 0, timed_runs: int = TIMED_RUNS) -> FirstLook:
    """One sampled step (T=1, `seed`) for the distribution, the draw and the cache; then
    `timed_runs` greedy two-step runs, each step timed by the engine, the median kept."""
    if not prompt_ids:
        raise ValueError("`prompt_ids` must hold at least one token")
    trace = new_trace(model, tokenizer, prompt_ids, 1, seed=seed, stop_at_eos=False)
    record = trace.step(DRAW_SETTINGS, seed)
    probs = record.logits.double().softmax(-1)
    top = probs.topk(TOP_TOKENS)
    greedy_id = int(top.indices[0])
    sorted_probs = probs.sort(descending=True).values
    above = torch.cat([torch.zeros(1, dtype=sorted_probs.dtype), sorted_probs.cumsum(0)])  # mass of ranks < r
    seen = seen_mask(prompt_ids, len(probs))
    draws = []
    for s in range(seed, seed + DRAW_SEEDS):
        u = float(run_uniforms(s, 1)[0])  # the number a run with this seed draws at its first step
        picked = draw(record.logits, DRAW_SETTINGS, seen, u)
        draws.append(
            SeededDraw(
                seed=s,
                u=u,
                token=readable_token(tokenizer, picked.token_id),
                probability=float(probs[picked.token_id]),
                rank=picked.rank + 1,
                this_far_down=float(max(0.0, 1 - above[picked.rank])),
            )
        )
    half = int((above[1:] < 0.5).sum()) + 1
    runs = [run_greedy(model, tokenizer, prompt_ids, 2, stop_at_eos=False).records for _ in range(timed_runs)]
    shape = trace.kv_shape
    return FirstLook(
        prompt_tokens=readable_tokens(tokenizer, prompt_ids),
        vocab_size=len(probs),
        top=list(zip(readable_tokens(tokenizer, top.indices.tolist()), top.values.tolist())),
        greedy_token=readable_token(tokenizer, greedy_id),
        greedy_probability=float(probs[greedy_id]),
        prefill_ms=statistics.median(r[0].forward_ms for r in runs),
        decode_ms=statistics.median(r[1].forward_ms for r in runs),
        timed_runs=timed_runs,
        cache_tokens=record.cache_tokens,
        cache_bytes=record.cache_bytes,
        formula_bytes=shape.formula_bytes(record.cache_tokens),
        layers=shape.layers,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        bytes_per_element=shape.bytes_per_element,
        draws=tuple(draws),
        half_of_draws_within=half,
        half_mass=float(above[half]),
        short_of_half_mass=float(above[half - 1]),
    )
