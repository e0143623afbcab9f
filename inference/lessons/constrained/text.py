"""The constrained-decoding page's sentences: every number passed in, never typed."""

from __future__ import annotations

import math

from inference.core.tokens import counted_runs, markdown_token_text, readable_token
from inference.lessons import glossary
from inference.lessons.glossary import plural

INTRO = (
    "Structured output (JSON mode, a JSON schema, a regex, a list of choices) is one more stage in the "
    "sampling pipeline: a **mask** that removes every token the format does not allow at this point. "
    "A real library (llguidance) compiles the format against this model's tokenizer, and each step the pipeline "
    "sets every token it rules out to −∞."
)
# Said beside the step's own Zₜ (it was the intro's last sentence; the intro now leaves room for the first step).
ZT_NOTE = f"**Z<sub>t</sub>** says how hard the format fights the model at that step: {glossary.explain('Z_t')}."
SETTINGS_LABEL = "Format, seed, length, temperature, top-k, top-p, where the mask runs"  # presenter mode's fold


def settings_now(
    format_name: str,
    prompt: str,
    temperature: float,
    top_k: int,
    top_p: float,
    mask_first: bool,
    seed: int,
    max_new: int,
) -> str:
    """Presenter mode's lines under the folded settings: the format and every setting acting on the draw, then the
    prompt (shown literally, on one line)."""
    parts = [f"Now: {format_name}", "greedy" if temperature == 0 else f"temperature {temperature:g}"]
    parts += [f"top-k {top_k}"] * bool(top_k) + [f"top-p {top_p:g}"] * (top_p < 1)
    parts += ["the mask first" if mask_first else "the mask after temperature, top-k and top-p"]
    parts += [f"seed {seed}", f"at most {max_new} new tokens"]
    return " · ".join(parts) + "  \nPrompt: " + markdown_token_text(prompt)


SECTIONS = {  # each closed section's one line: what opening it shows
    "strategies": "mask the whole vocabulary, or draw first and check one token, timed on this run",
    "engine": "llama-server writes the same text under the same format (greedy, the bundled model)",
}


def sentence_token(tokenizer, token_id: int) -> str:
    """A token in a step's sentence as the step's chart labels it: quoted, whitespace visible, a long indent counted
    ("'↵␣×11'", not eleven marks)."""
    return markdown_token_text(repr(counted_runs(readable_token(tokenizer, token_id))))


def step_sentence(
    index: int, allowed: int, vocab: int, mass: float, token: str, removed: list[tuple[str, float]]
) -> str:
    """One recorded step in words."""
    wanted = ", ".join(f"{name} ({p:.1%})" for name, p in removed[:3])
    lead = (
        f"Step {index}: the format allowed **{allowed:,} of {vocab:,}** tokens, which held "
        f"**Z = {mass:.3g}** of the model's probability; it drew {token}."
    )
    return lead + (f" Removed, though the model wanted them most: {wanted}." if wanted else "")


def forced_sentence(
    model_name: str, logprob: float, logprob_plain: float, tokens: int, hardest: float, hardest_step: int
) -> str:
    """How far the format pushed the loaded model from where it would have gone, in its own log-probabilities."""
    gap = logprob_plain - logprob
    if gap <= 0:
        verdict = f"The format cost {model_name} nothing here: it finds the constrained text at least as likely."
        likelier = f"{math.exp(-gap):,.1f} times as likely"
    else:
        verdict = f"The mask pushed {model_name} away from where it was going."
        likelier = (f"e^{gap:.0f}" if gap > 40 else f"{math.exp(gap):,.0f}") + " times less likely"
    return (
        f"{verdict} Under its own distribution the constrained text has log p **{logprob:.1f}** over {tokens} "
        f"tokens, its own continuation of the same length **{logprob_plain:.1f}**: {likelier}. "
        f"It fought hardest at step {hardest_step}, where the allowed tokens held {hardest:.2g} of its probability."
    )


def engine_needs(model_name: str, served_name: str, built: bool) -> str:
    """Why the llama-server comparison is not offered: what it serves here, and what is missing."""
    build = "" if built else "llama-server built here (`python -m inference.engines llamacpp build`) and "
    now = "" if model_name == served_name else f"; {model_name} is loaded now"
    return f"Needs {build}{served_name} loaded: llama-server serves that model for this comparison{now}."


def cost_sentence(mask_us_p50: float, forward_ms_p50: float, compile_ms: float, tokenizer_note: str) -> str:
    share = mask_us_p50 / (forward_ms_p50 * 1000 + mask_us_p50) if forward_ms_p50 > 0 else 0.0
    return (
        f"Compiling the format took {compile_ms:.1f} ms once ({tokenizer_note}); then computing the mask took "
        f"**{mask_us_p50:,.0f} µs** per token (median) beside a forward pass of **{forward_ms_p50:.2f} ms**: "
        f"{share:.1%} of a step on this machine. On a large model the forward "
        "pass grows and the mask does not (it depends on the format and the vocabulary), which is why engines overlap "
        "it with the GPU's forward pass."
    )


def strategy_sentence(
    model_name: str, vocab: int, first_valid: int, steps: int, mask_all_us: float, sample_first_us: float, same: int
) -> str:
    """Sample first then check, against masking every token, on the loaded model (its name and vocabulary)."""
    if sample_first_us < mask_all_us:
        why = "faster here: a valid first draw skips the mask, and the mask costs more than that draw"
    else:
        why = (
            f"slower here: every invalid first draw costs a second draw, and on {model_name} with its {vocab:,}-token "
            "vocabulary llguidance's mask is cheaper than a draw (llama.cpp added the check for grammars whose mask "
            "over a large vocabulary cost more than the whole rest of sampling)"
        )
    return (
        f"Sample first, then check: the unmasked draw was already allowed at **{first_valid} of {steps}** "
        f"{'step' if steps == 1 else 'steps'} ({first_valid / steps:.0%}); there one token is checked instead of the whole vocabulary. "
        f"Median per step {sample_first_us:,.0f} µs against {mask_all_us:,.0f} µs for masking every token: {why}. "
        f"Both picked the same token at {same} of {plural(steps, 'step')} (greedy: always the same)."
    )


def engine_sentence(same: bool, ours: str, theirs: str, predicted_ms: float | None, tokens: int) -> str:
    timing = (
        f" llama-server reported {predicted_ms:.1f} ms for its {tokens} generated tokens, grammar included."
        if predicted_ms is not None
        else ""
    )
    if same:
        return f"llama.cpp's server, given the same format and greedy, wrote **the same text** as our run.{timing}"
    return (
        "llama.cpp's server wrote a different text: its grammar (converted by llama.cpp itself) allows whitespace "
        "in fewer places than llguidance's (none after a string with a maxLength), so where our run took a space "
        f"the two part.{timing}"
    )
