"""The Speculative decoding page's sentences, every number passed in (from the run, its timing or the sweep)."""

from __future__ import annotations

from inference.core.machine import describe_bytes
from inference.core.tokens import markdown_token_text
from inference.core.wording import plural
from inference.lessons.speculative import drafting, shortlist
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import Comparison
from inference.lessons.speculative.feature_draft import FEATURE_DRAFT_NAME
from inference.lessons.speculative.run import RoundRecord
from inference.lessons.speculative.sweep import sweep_runs

# Two sentences on the first screen (#46 item 11): the page opens with one round already drafted and checked under them.
INTRO = (
    "Something cheap **drafts** γ tokens; the big model (the **target**) checks them all in **one** pass. The text "
    "is **exactly** what plain decoding would sample, only sooner when the drafts are good."
)
HOW_HEADING = "How a round works"
HOW_SUMMARY = "the test u ≤ p/q, the residual, and why the text is unchanged"
HOW_A_ROUND_WORKS = (
    "A decode step of the big model reads every weight to make **one** token. Speculative decoding lets something "
    "cheap **draft** γ tokens, then the target scores all of them in **one** forward pass. Each draft token passes a "
    "random test, u ≤ p/q; at the first failure the target draws its own token from what is left, max(0, p − q). The "
    "result is **exactly** the text plain decoding would sample (greedy: the very same tokens) — only faster when "
    "the drafts are good and cheap."
)
DRAFTER_HELP = (
    "A feature draft runs one small layer on the target's own last hidden state (what the target's output layer "
    "read) and the next token, so it starts where the target stopped instead of re-reading the words; "
    "a draft model guesses with its own (small) network; a self-draft runs only the target's first layers, then its "
    "final norm and output layer (the target's own weights, shared, not copied); prompt lookup copies what followed "
    "the last few tokens earlier in the text, and needs no model at all."
)
SELF_LAYERS_HELP = (
    "A draft pass costs about this share of the target's layers, plus the output layer. Fewer layers: cheaper "
    "guesses, but the final norm and output layer were trained to read the LAST layer's output, so fewer are right."
)
SELF_SHORTLIST_HELP = (
    "Its output layer multiplies only the tokenizer's first ids (a BPE tokenizer numbers its merges most frequent "
    "first), so a draft pass skips most of the output layer's weights; it can then never propose a rarer token."
)
VERIFY_HEADING = "What a verify pass costs, on two models"
# each closed section's one line: what opening it shows
VERIFY_SUMMARY = "why the same γ wins on one target and loses on the other"
SWEEP_SUMMARY = "speed-up and tokens per pass for every γ and temperature, measured"
THEORY_SUMMARY = "the speed-up Leviathan et al.'s formula predicts from α, γ and the measured costs"
ROUNDS_SUMMARY = "each round's drafts, verdicts and times as a table (CSV)"
SOURCES_SUMMARY = "how other tools count α"


def self_draft_labels(layers: int, shortlist_rows: int) -> tuple[str, str]:
    """The self-draft's two controls: how many layers it keeps, and whether it scores only the first tokens."""
    return f"Layers the self-draft keeps (of {layers})", f"Score only the tokenizer's first {shortlist_rows:,} tokens"


def self_draft_name(target_name: str, layers: int, of: int) -> str:
    return f"{target_name}'s first {layers} of {of} layers"


def verify_not_yet(target_name: str, other_name: str, positions: int) -> str:
    return (
        f"Measures one forward pass over {positions} new tokens against a one-token pass, on {target_name} and on "
        f"{other_name} (a few seconds): what speculation's verify pass costs on each."
    )


def verify_caption(positions: int) -> str:
    return (
        f"A pass over {positions} new tokens ÷ a one-token pass, each the median of alternated passes after the same "
        "filler context, on this machine now (other programs running on it slow both alike)."
    )


DRAFT_SOURCE = "Draft model for this target (hub id or folder)"
DRAFT_SOURCE_HELP = "It must use the target's tokenizer, e.g. distilgpt2 for gpt2, SmolLM2-135M for SmolLM2-360M."
SAMPLING_HELPS = {
    "temperature": "0 = greedy: a draft token is kept while it is the target's top token.",
    "top_p": "Applied to p and q alike. 1 = off.",
    "top_k": "Applied to p and q alike. 0 = off.",
    "min_p": "Applied to p and q alike. 0 = off.",
}
# α, defined once: every α on this page (metric, theory axis, sweep) is this ratio.
ALPHA_DEFINITION = (
    "**α, the acceptance rate, on this page always means accepted ÷ checked.** A round stops testing at the "
    "first rejection, so the drafts after it are never checked, and counting them would charge the drafter for "
    "tests that never happened. Accepted ÷ checked is the chance that one tested draft token passes: the α of "
    "Leviathan et al.'s formula. Some tools report accepted ÷ drafted instead (llama-server's 'draft acceptance' "
    "line counts every draft token it sent, those after a rejection too); that number is lower whenever a round "
    "rejects early."
)
ALPHA_SOURCE = (
    "llama-server's 'draft acceptance' counts accepted ÷ drafted over every draft token it sent to the target; "
    "llama.cpp pull request #14104 only stopped it counting drafts it never sent."
)
GAMMA = (
    "How many tokens the drafter guesses before the target checks them. Changing it keeps the run: the next round "
    "drafts the new number, and the rounds made keep theirs (the table at the bottom lists each round's γ)."
)
SEED_HELP = "The same seed, prompt and settings always give the same tokens."


def max_tokens_help(cap: int) -> str:
    return f"New tokens to write at most; capped at {cap} on this server."


NEXT_ROUND = "press Step for the next round"
NO_ROUND_YET = "Press **Step** to run one round: the drafter guesses, the target checks every guess in one pass."
GREEDY_TEST = (
    "At temperature 0 p and q are certain (100% on each model's top token): the test keeps a "
    "draft token exactly while it is the target's top token, and no random number is needed."
)
CAPTIONS = {  # what each chart and table shows, and how its numbers were obtained
    "pq": "q and p of each drafted token under the same sampling settings, from the two models' "
    "real logits (greedy runs show T=1 probabilities). Outline: green accepted, red rejected, grey "
    "never checked.",
    "accept": "Green passed, red failed. u is the uniform number drawn for each test (seeded generator); the bar "
    "is min(1, p/q), computed exactly, and its label p/q. Drafts after the first failure are never tested.",
    "residual": "p, q and the residual normalise(max(0, p − q)) at the rejected position, for the "
    "tokens where any of them is largest; ▶ marks the token drawn from the residual. The residual "
    "gives back exactly the probability the draft took too much of: that is why the text keeps the "
    "target's distribution.",
    "theory": "α = accepted ÷ checked. The three curves are Leviathan et al.'s formula (1 − α^(γ+1)) / ((1 − α)(γc + 1)), with c measured here; the dashed "
    "curve also charges the verify pass its measured cost. The star is this run, measured.",
    "sweep_verify": "Each run's median verify pass (γ + 1 tokens after the first round) over the median one-token "
    "target pass of plain decoding on the same cache, both wall times here; the median over the sweep's "
    "temperatures at each γ. The dotted line is the one pass Leviathan et al.'s formula charges a verify.",
    "sweep_tokens": "Solid: tokens per target pass counted in each run. Dashed: (1 − α^(γ+1)) / (1 − α), "
    "computed exactly from that run's α.",
    "rounds": "One row per round (one target pass each). Times are wall time on this machine.",
}


def bundled_draft_unusable(target_name: str, problem: str) -> str:
    return (
        f"The bundled draft cannot serve {target_name}: {problem} Type a hub draft that shares "
        f"{target_name}'s tokenizer, or pick a self-draft or prompt lookup above (prompt lookup is running now)."
    )


def typed_draft_unusable(problem: str, load_failed: bool) -> str:
    if load_failed:
        return f"{problem} Using prompt lookup instead."
    return f"{problem} Using prompt lookup instead, which needs no second model."


def run_lead(target_name: str, draft_name: str | None, prompt_tokens: int, generated: int, rounds: int) -> str:
    """The status line's first part: who checks, who drafts, and what the run holds."""
    drafter = drafter_words(draft_name) if draft_name else "prompt lookup"
    return (
        f"{target_name} checks, {drafter} drafts · {prompt_tokens} prompt tokens · "
        f"{generated} generated in {plural(rounds, 'target pass', 'target passes')}"
    )


def round_sentence(record: RoundRecord, token: str) -> str:
    """What one round did; `token` is the round's own token, already escaped for the page."""
    rejected = (  # greedy: no draw, the target's top token replaces the first draft that was not it
        f"draft token {record.accepted + 1} was not the target's top token, so the target's top token '{token}' "
        "took its place"
        if record.greedy
        else f"draft token {record.accepted + 1} failed its test, so the target drew its own token '{token}' from "
        "the residual"
    )
    verdict = {
        "residual": rejected,
        "bonus": f"all {record.drafted} draft tokens passed, and the same target pass gave a bonus token '{token}'",
        "target": f"nothing was drafted, so this pass made one token '{token}', as plain decoding would",
    }[record.token_kind]
    unchecked = record.drafted - record.checked
    never = f" ({unchecked} after the rejection were never checked)" if unchecked else ""
    return (
        f"**Round {record.index}:** {record.drafted} drafted, {record.checked} checked, {record.accepted} "
        f"accepted{never}; {verdict}. **{len(record.new_tokens)} token(s) from one target pass.**"
    )


def run_metrics(result: Comparison, gamma: int) -> list[tuple[str, str, str]]:
    """The run's six metrics against plain decoding, as (label, value, hover help)."""
    summary, alpha, c = result.summary, result.summary.acceptance_rate, result.cost_ratio
    predicted = result.predicted_speedup(measured_verify=True)
    per_drafted = f" Accepted ÷ drafted would be {summary.accepted / summary.drafted:.0%}." if summary.drafted else ""
    return [
        (
            "α = accepted ÷ checked",
            "–" if alpha is None else f"{alpha:.0%} ({summary.accepted} of {summary.checked})",
            f"{summary.accepted} accepted of {summary.checked} draft tokens checked; {summary.drafted} were drafted, "
            f"{summary.drafted - summary.checked} of them after a rejection, never checked.{per_drafted}",
        ),
        (
            "Tokens per target pass",
            f"{summary.tokens_per_target_pass:.2f}",
            f"{summary.new_tokens} tokens from {summary.rounds} passes of the target; plain decoding makes 1.",
        ),
        (
            "Measured speed-up",
            f"{result.measured_speedup:.2f}×",
            f"Plain decoding {result.plain.total_ms:.0f} ms vs speculative {summary.total_ms:.0f} ms for these tokens.",
        ),
        (
            "c: draft ÷ target pass",
            "≈ 0 (a search)" if c is None else f"{c:.2f}",
            "Median one-token draft pass over the median one-token target pass, both measured.",
        ),
        (
            "Verify ÷ target pass",
            f"{result.verify_cost:.2f}" + (" (with the prompt)" if summary.verify_read_prompt else ""),
            f"Scoring γ + 1 = {gamma + 1} positions in one pass, against one position."
            + (
                " Round 0's pass also read the prompt: the next round's measures the verify pass alone."
                if summary.verify_read_prompt
                else ""
            ),
        ),
        (
            "Predicted speed-up",
            "–" if predicted is None else f"{predicted:.2f}×",
            "(1 − α^(γ+1)) / (1 − α) tokens per round ÷ (γ·c + verify cost), from this run's α and costs.",
        ),
    ]


def timeline_caption(tokens: int) -> str:
    return (
        "Wall time on this machine: every draft pass and verify pass of this run, and plain decoding "
        f"(one target pass and one draw per token) of the same {tokens} tokens, timed just now. "
        "The machine is shared: a single run can be stretched by other programs."
    )


def sweep_heading(gammas, temperatures) -> str:
    return f"Sweep: γ = {gammas[0]}…{gammas[-1]} at temperature " + ", ".join(f"{t:g}" for t in temperatures)


def drafter_label(draft_name: str | None, shortlist_size: int | None = None) -> str:
    if not draft_name:
        return "prompt lookup (no model)"
    return drafter_words(draft_name) + (f" ({shortlist_size:,}-token shortlist)" if shortlist_size else "")


def drafter_words(draft_name: str) -> str:
    """ "feature draft <name>" for SmolLM2's feature draft (it is not a model of its own), else "draft model <name>"."""
    return f"feature draft {draft_name}" if draft_name == FEATURE_DRAFT_NAME else f"draft model {draft_name}"


SHORTLIST_URL_PROBLEM = (
    f"is not a shortlist size (use {', '.join(map(str, (*shortlist.SIZES, *shortlist.LARGE_SIZES)))}, or 0 for every "
    "token); "
    f"using {shortlist.DEFAULT_SIZE}."
)
SHORTLIST_HELP = (
    "The draft's output layer is most of its work. Scoring only the most frequent tokens of its training text makes "
    "each draft pass cheaper; a token outside the shortlist is never proposed (q = 0), so the target's check still "
    "gives exactly its own text (FR-Spec, Zhao et al. 2025). It costs acceptance only where the target wants a rarer "
    "token."
)


URL_CHOICES = {  # a link's values the page takes, and what it says of any other
    "spec_drafter": (
        drafting.DRAFTERS,
        "is not a drafter (use `feature`, `draft`, `self` or `lookup`); using the draft model.",
    ),
    "spec_shortlist": (drafting.SHORTLIST_CHOICES, SHORTLIST_URL_PROBLEM),
}


def shortlist_choices(draft) -> dict[int, str]:
    """The shortlist sizes this draft offers, every token last, each as the page lists it (empty: none offered)."""
    sizes = drafting.shortlist_sizes(draft)
    if not sizes:
        return {}
    counts, vocab = drafting.draft_counts(draft), spec.vocabulary_rows(draft.model)
    return {size: shortlist_option(size, counts, vocab) for size in [*sizes, drafting.SHORTLIST_ALL]}


def shortlist_option(size: int, counts, vocab: int) -> str:
    """A shortlist choice as the page lists it, its coverage computed from the draft's token counts."""
    if not size:
        return f"all {vocab:,}"
    # short: in presenter mode at 800 px a longer choice was cut ("... of its trainir")
    return f"{size:,} most frequent ({shortlist.coverage(counts, size):.1%} of its training text)"


def sweep_not_yet(tokens: int, drafter: str, other_side: tuple[str, str] | None = None) -> str:
    """What the sweep button will measure: `timing.sweep_runs()` runs, on `drafting.other_side`'s target too."""
    runs = sweep_runs()
    also = (
        f", then the same {runs} on the bundled {markdown_token_text(other_side[0])} (another target for the same "
        "draft, measured beside it)"
        if other_side
        else ""
    )
    return (
        f"{runs} speculative runs of {tokens} tokens with {drafter}{also}, each timed against plain decoding of its "
        "text."
    )


def side_heading(target: str, weight_bytes: int) -> str:
    return f"**Target {markdown_token_text(target)}** ({describe_bytes(weight_bytes)} of weights)"


def sweep_speed_caption(tokens: int, drafter: str) -> str:
    return (
        f"Drafter: {drafter}. Solid: measured speed-up of each run ({tokens} tokens, seed 0, temperature "
        "the only sampling setting). Dashed: predicted from the same run's α (accepted ÷ checked), c and verify cost."
    )


def sweep_tokens_caption(drafter: str) -> str:
    return f"Drafter: {drafter}. " + CAPTIONS["sweep_tokens"]
