"""The Cost page's sentences, every number passed in (from the measured answer, the sweeps, the loaded model)."""

from __future__ import annotations

from inference.lessons.cost.experiments import AnswerCost
from inference.lessons.prefill_decode.timing import Crossover

MOE_POINTER = (
    "A Mixture-of-Experts model holds many expert MLPs but runs only a few for each token: memory is paid for its "
    "total parameters, and the arithmetic for its active ones. Whether the time follows is a measurement: the "
    "Mixture of Experts page runs a real MoE trained here, shows its router token by token, and times it against "
    "a dense model (a small MoE on a CPU can be slower) and MoE against dense models at scale."
)
SECTIONS = {  # each closed section's one line: what opening it shows
    "gpu": "why price lists charge more for output tokens than for input tokens (illustrative)",
}


def output_token_help(answer: AnswerCost) -> str:
    """Which decode step the page's 'per output token' is: not the step other pages time at a fixed context."""
    passes, step = answer.reply_tokens - 1, answer.decode_step
    how = "median" if step is not None else "mean"
    said = (
        f"The {how} of the {passes} decode passes (forward pass only) of this {answer.reply_tokens}-token reply after "
        f"a {answer.prompt_tokens}-token prompt, one run after a warm-up: each pass reads a longer cache than the "
        "last, so it is not the single step at a short context other pages time."
    )
    return said if step is None else f"{said} {step.label()}."


def wait_sentence(answer: AnswerCost, context: int, crossing: Crossover | None) -> str:
    """When the prompt is what makes you wait: the prompt whose prefill takes as long as the reply's decode passes,
    from the Prefill vs decode sweep (`crossing`) or, without it, in proportion to the prefill measured here; said
    as an extrapolation, and as no prompt this model can read, when it lands past the model's `context`."""
    passes, decode_ms = answer.reply_tokens - 1, answer.decode_ms
    lead = f"**When the prompt is what makes you wait.** These {passes} decode passes took {decode_ms:,.0f} ms; "
    dominates = " Below that length the reply dominates the wait, above it the prompt."
    whatever = " On this model the reply dominates the wait, whatever the prompt."
    if crossing is not None:
        tokens = crossing.prompt_tokens
        if crossing.how == "below":
            return lead + (
                f"even the shortest prompt of the Prefill vs decode sweep ({tokens:,.0f} tokens) takes longer to read."
                " Past a few tokens the prompt dominates the wait."
            )
        if crossing.beyond(context):
            return (
                lead
                + f"**no prompt this model can read takes as long**: the Prefill vs decode sweep's line through its "
                f"last two points reaches that time at about {tokens:,.0f} tokens, past the model's {context:,}-token "
                "context (an extrapolation)." + whatever
            )
        how = "between two measured lengths" if crossing.how == "interpolated" else "extended past its longest prompt"
        return (
            lead + f"the Prefill vs decode sweep puts the prompt whose prefill takes as long at about "
            f"**{tokens:,.0f} tokens** ({how})." + dominates
        )
    tokens = answer.crossover_prompt_tokens
    if tokens > context:
        whole_ms = context * answer.ms_per_input_token
        return (
            lead + f"**no prompt this model can read takes as long**: at the rate measured here its whole "
            f"{context:,}-token context would prefill in about {whole_ms:,.0f} ms. In proportion, the prompt that "
            f"would take as long is about {tokens:,.0f} tokens, past the context (an extrapolation; the Prefill vs "
            "decode page's sweep measures the real curve)." + whatever
        )
    return (
        lead + f"a prompt of about **{tokens:,.0f} tokens** would take as long to read, if prefill time grew in "
        "proportion to the prompt at the rate measured here (an estimate; run the sweep on the Prefill vs decode "
        "page for the measured curve)." + dominates
    )


def context_sentence(short_tokens: int, short_ms: float, long_tokens: int, long_ms: float) -> str:
    """Decode step time at the shortest and longest context measured, and what the growth says."""
    growth = long_ms / short_ms
    if growth < 1:
        verdict = (
            "A longer cache cannot make a step cheaper: the difference is the shared machine's noise, and on this "
            "model the weights and the fixed cost of a pass outweigh the cache at these lengths; on long contexts "
            "and large batches the cache is what every step reads most of."
        )
    elif growth < 1.25:
        verdict = (
            "On this model the weights and the fixed cost of a pass still outweigh the cache at these lengths; on "
            "long contexts and large batches the cache is what every step reads most of."
        )
    else:
        verdict = "The cache already shows: the longer the conversation, the dearer every further token."
    return (
        f"A decode step took **{short_ms:.2f} ms** with {short_tokens:,} tokens before it and **{long_ms:.2f} ms** "
        f"with {long_tokens:,} ({growth:.2f}×). {verdict}"
    )
