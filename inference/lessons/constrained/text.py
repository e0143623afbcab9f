"""The constrained-decoding page's sentences, as templates: every number and comparison filled from the data."""

from __future__ import annotations

from inference.core.tokens import counted_runs, markdown_token_text, readable_token
from inference.lessons import glossary

TEXT = {
    "intro": (
        "Structured output (JSON mode, a JSON schema, a regex, a list of choices) is one more stage in the sampling "
        "pipeline: a **mask** that removes every token the format does not allow at this point. A real library "
        "(llguidance) compiles the format against this model's tokenizer, and each step the pipeline sets every token "
        "it rules out to −∞."
    ),
    "zt_note": f"**Z<sub>t</sub>** says how hard the format fights the model at that step: {glossary.explain('Z_t')}.",
    "settings_label": "Format, seed, length, temperature, top-k, top-p, where the mask runs",
    "settings_now": "Now: {format} · {draw} · {position} · seed {seed} · at most {max_new} new tokens  \nPrompt: {prompt}",
    "strategies_section": "mask the whole vocabulary, or draw first and check one token, timed on this run",
    "engine_section": "llama-server writes the same text under the same format (greedy, the bundled model)",
    "step": (
        "Step {index}: the format allowed **{allowed:,} of {vocab:,}** tokens, which held **Z = {mass:.3g}** of the "
        "model's probability; it drew {token}."
    ),
    "removed": " Removed, though the model wanted them most: {wanted}.",
    "cost_nothing": "The format cost {model} nothing here: it finds the constrained text at least as likely.",
    "pushed": "The mask pushed {model} away from where it was going.",
    "forced": (
        " Under its own distribution the constrained text has log p **{logprob:.1f}** over {tokens} tokens, its own "
        "continuation of the same length **{logprob_plain:.1f}**: {likelier}. It fought hardest at step {hardest_step}, "
        "where the allowed tokens held {hardest:.2g} of its probability."
    ),
    "cost": (
        "Compiling the format took {compile_ms:.1f} ms once (the tokenizer was wrapped for llguidance once before, "
        "~0.1 s); then computing the mask took **{mask_us:,.0f} µs** per token (median) beside a forward pass of "
        "**{forward_ms:.2f} ms**: {share:.1%} of a step on this machine. On a large model the forward pass grows and "
        "the mask does not (it depends on the format and the vocabulary), which is why engines overlap it with the "
        "GPU's forward pass."
    ),
    "strategies": (
        "Sample first, then check: the unmasked draw was already allowed at **{first_valid} of {steps}** "
        "({share:.0%}); there one token is checked instead of the whole vocabulary. Median per step "
        "{c.sample_first_us_p50:,.0f} µs against {c.mask_all_us_p50:,.0f} µs for masking every token: sampling first "
        "is {strategy_words} here. Computing the mask against one unmasked draw on {model} with its {vocab:,}-token "
        "vocabulary: {mask_us:,.0f} µs against {draw_us:,.0f} µs per step (medians), {mask_words} (llama.cpp added "
        "the check for grammars whose mask over a large vocabulary cost more than the whole rest of sampling). Both "
        "picked the same token at {same} of {steps} (greedy: always the same)."
    ),
    "engine_needs": "Needs {build}{served} loaded: llama-server serves that model for this comparison{now}.",
    "engine_same": "llama.cpp's server, given the same format and greedy, wrote **the same text** as our run.",
    "engine_differs": (
        "llama.cpp's server wrote a different text: its grammar (converted by llama.cpp itself) allows whitespace in "
        "fewer places than llguidance's (none after a string with a maxLength), so where our run took a space the two "
        "part."
    ),
    "engine_timing": " llama-server reported {ms:.1f} ms for its {tokens} generated tokens, grammar included.",
}


def sentence_token(tokenizer, token_id: int) -> str:
    """A token in a step's sentence as the step's chart labels it: quoted, whitespace visible, a long indent counted
    ("'↵␣×11'", not eleven marks)."""
    return markdown_token_text(repr(counted_runs(readable_token(tokenizer, token_id))))
