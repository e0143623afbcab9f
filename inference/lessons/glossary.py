"""The app's jargon, each term with one line a student who has not met it can read: a widget's hover `help=`
(`help_for`) or a one-line note under what uses it (`note`), so every page explains a term the same way."""

from __future__ import annotations

from inference.core.wording import plural, signed  # noqa: F401 (the lessons' names for them)

TERMS: dict[str, str] = {
    "Z_t": "the probability the model itself put on the tokens the format allows at step t: 1 means the format "
    "took nothing away, 0.001 means it overruled 99.9% of what the model wanted",
    "nats": "the unit of information with the natural log (ln); 1 nat = 1.44 bits. A KL of 0.001 nats means two "
    "distributions that are nearly the same",
    "GFLOP/s": "billions of floating-point operations (multiplies and adds) done per second: how busy the "
    "arithmetic units were",
    "bootstrap": "resampling the measured runs with replacement many times to see how much a mean could move: "
    "the spread of those means gives the 95% interval",
    "α": "the acceptance rate: of the draft tokens the target checked, the share it accepted",
    "γ": "how many tokens the drafter guesses in one round before the target checks them in one pass",
    "-b/-ub": "llama-server's batch sizes: -b is the most prompt tokens one request hands over at a time, -ub the "
    "most one forward pass actually computes",
    "cache_n": "llama-server's count of prompt tokens it took from its cache instead of computing them again",
    "--cache-ram": "llama-server's option for how much memory (MiB) it may keep old prompts' KV caches in, to reuse "
    "them for a later request that starts the same way",
    "<|endoftext|>": "the special token a model writes to say its text is finished; the run stops there",
    "<|im_end|>": "the chat template's end-of-message token: the assistant's reply is over",
    "␣": "marks a space at the start of a token: most tokens carry the space before the word",
    "KV cache": "the keys and values each layer computed for the tokens so far, kept so a new token does not "
    "recompute them",
    "prefill": "the first pass, which reads the whole prompt at once",
    "decode": "each later pass, which adds one token",
}


def explain(term: str) -> str:
    """The term's one line (a KeyError names a term the glossary lacks)."""
    return TERMS[term]


def note(*terms: str) -> str:
    """A one-line Markdown note; `<|...|>` would be read as HTML and `Z_t`'s underscore as emphasis: code."""
    code = lambda term: f"`{term}`" if term.startswith(("<", "-")) or "_" in term else term
    return " · ".join(f"**{code(term)}**: {TERMS[term]}" for term in terms)


def help_for(*terms: str) -> str:
    return "\n\n".join(f"{term}: {TERMS[term]}." for term in terms)


def terms_in(text: str) -> list[str]:
    """The glossary's terms that a text uses, in the order they first appear."""
    return sorted((term for term in TERMS if term in text), key=text.find)
