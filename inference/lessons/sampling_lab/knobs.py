"""The sampling knobs every page shows, one row each: label, range, URL parameter, default and help written once
(`app_pages/shared/sampler_controls.py` draws them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    param: str  # URL parameter (after the page's prefix)
    field: str  # SamplingSettings field
    label: str
    low: float
    high: float
    step: float
    default: float | int | bool
    help: str

    @property
    def kind(self):
        return type(self.default)


CLASSIC = [
    Knob("t", "temperature", "Temperature", 0.0, 2.0, 0.05, 1.0,
         "0 = greedy: always the most likely token."),
    Knob("p", "top_p", "Top-p", 0.01, 1.0, 0.01, 1.0,
         "Keep the smallest set of likely tokens whose probability reaches p. 1 = off."),
    Knob("k", "top_k", "Top-k", 0, 200, 1, 0,
         "Keep only the k most likely tokens. 0 = off."),
    Knob("minp", "min_p", "Min-p", 0.0, 1.0, 0.01, 0.0,
         "Drop tokens less likely than min-p × the top token's probability, measured where min-p runs in the stage order (in transformers' order after the penalty, temperature, top-k and top-p, so a higher temperature lets more tokens through). 0 = off."),
    Knob("rep", "repetition_penalty", "Repetition penalty", 0.5, 2.0, 0.05, 1.0,
         "Divides the logit of every token already in the text when it is positive and multiplies it when negative: above 1 a seen token usually becomes less likely, though its probability can still rise when others lose more. Below 1 favours repetition. 1 = off."),
]  # fmt: skip
MORE = [
    Knob("typ", "typical_p", "Typical-p", 0.05, 1.0, 0.01, 1.0,
         "Keep the tokens whose surprise is closest to the average surprise (entropy) until they hold p. 1 = off."),
    Knob("nsig", "top_n_sigma", "Top-nσ", 0.0, 4.0, 0.1, 0.0,
         "Keep logits within n standard deviations of the largest. 0 = off."),
    Knob("xtcp", "xtc_probability", "XTC probability", 0.0, 1.0, 0.05, 0.0,
         "How often XTC acts (its own seeded draw each step). 0 = off."),
    Knob("xtct", "xtc_threshold", "XTC threshold", 0.0, 0.5, 0.01, 0.1,
         "When XTC acts, every token at or above this probability goes, except the least likely of them."),
    Knob("dry", "dry_multiplier", "DRY multiplier", 0.0, 3.0, 0.05, 0.0,
         "Penalty for a token that would extend a repeated sequence. 0 = off."),
    Knob("drybase", "dry_base", "DRY base", 1.0, 4.0, 0.05, 1.75,
         "The penalty grows as base^(repeat length - allowed)."),
    Knob("drylen", "dry_allowed_length", "DRY allowed length", 1, 8, 1, 2,
         "Repeats up to this long go unpenalised."),
    Knob("tau", "mirostat_tau", "Mirostat τ (bits)", 0.5, 10.0, 0.25, 5.0,
         "The surprise per token mirostat steers toward."),
    Knob("eta", "mirostat_eta", "Mirostat η", 0.01, 1.0, 0.01, 0.1,
         "How fast mirostat's cut μ follows the surprise."),
]  # fmt: skip
