"""The Speculative decoding page's sentences: one dict of templates, filled from the run, its timing or the sweep.
Every comparison word comes from `measuring.compare` on the repeats behind it."""

from __future__ import annotations

import pandas as pd

from inference.core import machine
from inference.core.measuring import compare
from inference.core.tokens import markdown_token_text as md
from inference.lessons.speculative import drafting
from inference.lessons.speculative.comparison import SWEEP_GAMMAS, SWEEP_TEMPERATURES, break_even_alpha
from inference.lessons.speculative.drafters import DEFAULT_SHORTLIST, SHORTLIST_SIZES

T = {
    # -- the page's fixed text -------------------------------------------------------------------------------------
    "intro": "Something cheap **drafts** γ tokens; the big model (the **target**) checks them all in **one** pass. The "
    "text is **exactly** what plain decoding would sample, only sooner when the drafts are good.",
    "how_heading": "How a round works: the test u ≤ p/q, the residual, and why the text is unchanged",
    "how": "A decode step of the big model reads every weight to make **one** token. Speculative decoding lets "
    "something cheap **draft** γ tokens, then the target scores all of them in **one** forward pass. Each draft token "
    "passes a random test, u ≤ p/q; at the first failure the target draws its own token from what is left, "
    "max(0, p − q). The result is **exactly** the text plain decoding would sample (greedy: the very same tokens).",
    "drafter_help": "A feature draft runs one small layer on the target's own last hidden state and the next token, "
    "so it starts where the target stopped; a draft model guesses with its own small network; a self-draft runs only "
    "the target's first layers, then its final norm and output layer (shared, not copied); prompt lookup copies what "
    "followed the last few tokens earlier in the text, and needs no model at all.",
    "self_layers": "Layers the self-draft keeps (of {layers})",
    "self_layers_help": "A draft pass costs about this share of the target's layers, plus the output layer. Fewer "
    "layers: cheaper guesses, but the final norm and output layer were trained to read the LAST layer's output.",
    "self_shortlist": "Score only the tokenizer's first {rows:,} tokens",
    "self_shortlist_help": "Its output layer multiplies only the tokenizer's first ids (a BPE tokenizer numbers its "
    "merges most frequent first), skipping most of its weights; it can then never propose a rarer token.",
    "self_name": "{target}'s first {layers} of {of} layers",
    "draft_source": "Draft model for this target (hub id or folder)",
    "draft_source_help": "It must use the target's tokenizer, e.g. distilgpt2 for gpt2, SmolLM2-135M for SmolLM2-360M.",
    "bundled_unusable": "The bundled draft cannot serve {target}: {problem} Type a hub draft that shares {target}'s "
    "tokenizer, or pick a self-draft or prompt lookup above (prompt lookup is running now).",
    "typed_unusable": "{problem} Using prompt lookup instead.",
    "feature_unusable": "{problem} Prompt lookup drafts instead.",
    "shortlist_help": "The draft's output layer is most of its work. Scoring only the most frequent tokens of its "
    "training text makes each draft pass cheaper; a token outside the shortlist is never proposed (q = 0), so the "
    "target's check still gives exactly its own text (FR-Spec, Zhao et al. 2025).",
    "shortlist_url": f"is not a shortlist size (use {', '.join(map(str, SHORTLIST_SIZES))}, or 0 for every token); "
    f"using {DEFAULT_SHORTLIST}.",
    "drafter_url": "is not a drafter (use `feature`, `draft`, `self` or `lookup`); using the draft model.",
    "gamma_help": "How many tokens the drafter guesses before the target checks them. Changing it keeps the run: the "
    "next round drafts the new number, and the rounds made keep theirs (the table at the bottom lists each round's γ).",
    "seed_help": "The same seed, prompt and settings always give the same tokens.",
    "max_help": "New tokens to write at most; capped at {cap} on this server.",
    "lead": "{target} checks, {drafter} drafts · {prompt} prompt tokens · {generated} generated in {rounds} target "
    "pass(es)",
    "next_round": "press Step for the next round",
    "no_round": "Press **Step** to run one round: the drafter guesses, the target checks every guess in one pass.",
    "greedy_test": "At temperature 0 p and q are certain (100% on each model's top token): the test keeps a draft "
    "token exactly while it is the target's top token, and no random number is needed.",
    "alpha": "**α, the acceptance rate, on this page always means accepted ÷ checked.** A round stops testing at the "
    "first rejection, so the drafts after it are never checked. Accepted ÷ checked is the chance that one tested draft "
    "token passes: the α of Leviathan et al.'s formula. Some tools report accepted ÷ drafted instead (llama-server's "
    "'draft acceptance'), a lower number whenever a round rejects early.",
    "alpha_source": "llama-server's 'draft acceptance' counts accepted ÷ drafted over every draft token it sent to the "
    "target; llama.cpp pull request #14104 only stopped it counting drafts it never sent.",
    "theory_heading": "Theory: the speed-up Leviathan et al.'s formula predicts from α, γ and the measured costs",
    "verify_heading": "What a verify pass costs, on two models: why the same γ wins on one target and loses on the other",
    "verify_not_yet": "Measures one forward pass over {positions} new tokens against a one-token pass, on {target} and "
    "on {other} (a few seconds): what speculation's verify pass costs on each.",
    "verify_metric": "{name}: {positions} tokens in one pass",
    "verify_value": "{cost:.2f} one-token passes",
    "verify_detail": "{many:.1f} ms against {one:.1f} ms for one token",
    "sweep_heading": f"Sweep: γ = {SWEEP_GAMMAS[0]}…{SWEEP_GAMMAS[-1]} at temperature "
    + ", ".join(f"{t:g}" for t in SWEEP_TEMPERATURES)
    + ": speed-up and tokens per pass, measured",
    "sweep_not_yet": "{runs} speculative runs of {tokens} tokens with {drafter}{also}, each timed against plain "
    "decoding of its text.",
    "sweep_also": ", then the same {runs} on the bundled {other} (another target for the same draft)",
    "side": "**Target {target}** ({weights} of weights)",
    "rounds_heading": "Every round: each round's drafts, verdicts and times as a table (CSV)",
    "sources_heading": "Sources and notes: how other tools count α",
    # -- captions: what each chart shows, and how its numbers were obtained ------------------------------------------
    "pq": "q and p of each drafted token under the same sampling settings, from the two models' real logits (greedy "
    "runs show T=1 probabilities). Outline: green accepted, red rejected, grey never checked.",
    "accept": "Green passed, red failed. u is the uniform number drawn for each test (seeded generator); the bar is "
    "min(1, p/q), computed exactly, and its label p/q. Drafts after the first failure are never tested.",
    "residual": "p, q and the residual normalise(max(0, p − q)) at the rejected position; ▶ marks the token drawn from "
    "the residual. The residual gives back exactly the probability the draft took too much of: that is why the text "
    "keeps the target's distribution.",
    "timeline": "Wall time on this machine: every draft pass and verify pass of this run, and plain decoding (one "
    "target pass and one draw per token) of the same {tokens} tokens, timed just now.",
    "theory": "α = accepted ÷ checked. The curves are Leviathan et al.'s formula (1 − α^(γ+1)) / ((1 − α)(γc + 1)), "
    "with c measured here; the dashed curve also charges the verify pass its measured cost. The star is this run.",
    "verify_caption": "A pass over {positions} new tokens ÷ a one-token pass, medians of alternated passes after the "
    "same filler context, on this machine now. In full: {many}; {one}.",
    "sweep_speed": "Drafter: {drafter}. Solid: measured speed-up of each run ({tokens} tokens, seed 0, temperature the "
    "only sampling setting). Dashed: predicted from the same run's α, c and verify cost.",
    "sweep_tokens": "Drafter: {drafter}. Solid: tokens per target pass counted in each run. Dashed: "
    "(1 − α^(γ+1)) / (1 − α), computed exactly from that run's α.",
    "sweep_verify": "Each run's median verify pass (γ + 1 tokens) over the median one-token target pass of plain "
    "decoding, both wall times here; the median over the temperatures at each γ. Dotted: the one pass the formula "
    "charges.",
    "rounds": "One row per round (one target pass each). Times are wall time on this machine.",
    # -- one round -----------------------------------------------------------------------------------------------------
    "round": "**Round {r.index}:** {r.drafted} drafted, {r.checked} checked, {r.accepted} accepted{never}; {verdict}. "
    "**{tokens} token(s) from one target pass.**",
    "never": " ({n} after the rejection were never checked)",
    "greedy_residual": "draft token {n} was not the target's top token, so the target's top token '{token}' took its "
    "place",
    "residual_kind": "draft token {n} failed its test, so the target drew its own token '{token}' from the residual",
    "bonus_kind": "all {drafted} draft tokens passed, and the same target pass gave a bonus token '{token}'",
    "target_kind": "nothing was drafted, so this pass made one token '{token}', as plain decoding would",
    "with_prompt": " Round 0's pass also read the prompt: the next round's measures a verify pass alone.",
    # -- the run against plain decoding --------------------------------------------------------------------------------
    "speed": "**Measured: {r.measured_speedup:.2f}×** plain decoding's speed over these {tokens} tokens; round by round (the "
    "median of the rounds' speed-ups against plain decoding of their tokens), speculation was **{words}**.",
    "only_round_0": "Only round 0 has run, and its verify pass also read the prompt ({verify:.2f} target passes with "
    "it). Step once more: the next round measures a verify pass alone.",
    "break_even": "At γ = {gamma}, c = {c:.2f} and a verify pass of {verify:.2f} target passes, speculation only wins "
    "when α is above **{even:.0%}** (this run: {alpha}).",
    "never_wins": "At γ = {gamma} with c = {c:.2f} and a verify pass of {verify:.2f} target passes, even a draft that "
    "is always right cannot win: a round costs γ·c + verify = {cost:.2f} target passes for at most {most} tokens.",
    "temperature": "Temperature changes how often p and q agree, and so α: the sweep below measures it at three "
    "temperatures.",
    "why": "**Why:** here a verify pass of γ + 1 = {positions} tokens cost **{verify:.2f}** one-token passes "
    "(against one pass: {words}), where plain decoding runs {positions} passes for them.",
    "fits": " The target's {weights} of weights fit in this machine's {cache} last-level cache, so a pass does not "
    "wait on memory: its time is arithmetic and the fixed cost of its many small operations, which grow with the "
    "tokens it scores.",
    "does_not_fit": " The target's {weights} of weights do not fit in this machine's {cache} last-level cache: every "
    "pass reads them from memory, once for all the tokens it scores.",
    "larger": " Speculation is made for a target whose pass waits on reading its weights: {beside}load a model much "
    "larger than this cache, such as HuggingFaceTB/SmolLM2-135M (538 MB of float32 weights).",
    "c_lookup": "c = 0 for prompt lookup: no draft model runs. Its search is not free, though; its time is in the "
    "round's other costs.",
    "c": "**c = {c:.2f}** is measured, not a constant: the median one-token draft pass over the median one-token "
    "target pass of plain decoding, both wall times on this shared CPU. In full: {draft}; {plain}.",
    "overheads": "The formula predicts **{predicted:.2f}×**, the run measured **{r.measured_speedup:.2f}×**. The formula charges "
    "a round only its target passes (γ·c + verify). Measured here, the median round also spends {overhead:.2f} target "
    "passes on {what}, outside the model passes, while plain decoding spends {draw:.2f} per token on its draw. With "
    "both in the formula it predicts **{charged:.2f}×**.",
    # -- the sweep ------------------------------------------------------------------------------------------------------
    "mean_alpha": "Mean α over γ: {per_t}.",
    "won": "**{won} of {runs}** runs measured above the red line ({where}).",
    "best_worst": "Highest: **{best.measured_speedup:.2f}×** at γ = {best.gamma:.0f}, temperature "
    "{best.temperature:g}. Lowest: **{worst.measured_speedup:.2f}×** at γ = {worst.gamma:.0f}, temperature "
    "{worst.temperature:g}.",
    "c_range": "c, measured in each run, ran from **{low:.2f}** to **{high:.2f}** (median {median:.2f}).",
    "sides": "Both sides, measured just now with the same drafter: {parts}. {a} against {b}: the verify pass cost "
    "**{verify_words}** one-token passes of its own target, and the runs' speed-up was **{speed_words}**. Speculation "
    "pays where reading the weights, once for all the tokens of a pass, sets a pass's time (a model larger than the "
    "CPU's cache, or a GPU serving a large model).",
    "side_part": "on **{target}** ({weights} of weights) a verify pass cost **{verify:.2f}** one-token passes and the "
    "median run was **{speedup:.2f}×** (best {best:.2f}×)",
    # -- two models' verify passes ----------------------------------------------------------------------------------------
    "two_costs": "Measured here, a pass over {a.positions} tokens costs {a.cost:.2f} one-token passes on {a.name} and "
    "{b.cost:.2f} on {b.name}: on {a.name}, {words}.",
    "cache_sides": " This machine's last-level cache holds {cache}: {a}'s {a_weights} of weights {a_fit} it, {b}'s "
    "{b_weights} {b_fit} it. A pass over weights in the cache is mostly per-token work and fixed costs; a pass that "
    "streams its weights from memory reads them once for all its tokens.",
    "no_cache": " This machine does not report its cache size, so where the weights sit is unknown.",
    # -- the bundled drafts ---------------------------------------------------------------------------------------------
    "about_feature": "The draft is {name}: one decoder layer of SmolLM2's shape that reads SmolLM2's own last hidden "
    "state (EAGLE's idea) and scores its {shortlist:,} most frequent tokens with SmolLM2's output layer, trained here "
    "on {replies:,} of SmolLM2's greedy replies to story requests and general questions.",
    "about_draft": "The draft is {name}: a {params:.1f}M-parameter Llama ({settings[num_layers]} layers of width "
    "{settings[hidden_size]}, SmolLM2's tokenizer), trained here on {stats[train_tokens_in_corpus]:,} tokens of TinyStories and then on {replies:,} of SmolLM2's own greedy "
    "replies to story requests.",
    "measured": " Measured when shipped (greedy, γ {m[gamma]}, {m[cpu]}): on a story request it kept "
    "{story[acceptance_rate]:.0%} of its guesses and ran {story[speedup_vs_plain]:.2f}× plain decoding; on a question "
    "it kept {question[acceptance_rate]:.0%} ({question[speedup_vs_plain]:.2f}×).",
    "others": " On {n} other requests ({asked}) it ran {low:.2f}× to {high:.2f}×, keeping {kept_low:.0%} to "
    "{kept_high:.0%}.",
}
METRICS = (  # the run's six metrics against plain decoding: (label, value, hover help), filled from the comparison
    ("α = accepted ÷ checked", "{alpha_value}", "{s.accepted} accepted of {s.checked} draft tokens checked; {s.drafted} "
     "were drafted, {unchecked} of them after a rejection, never checked.{per_drafted}"),
    ("Tokens per target pass", "{s.tokens_per_target_pass:.2f}",
     "{s.new_tokens} tokens from {s.rounds} passes of the target; plain decoding makes 1."),
    ("Measured speed-up", "{r.measured_speedup:.2f}×",
     "Plain decoding {r.plain.total_ms:.0f} ms vs speculative {s.total_ms:.0f} ms for these tokens."),
    ("c: draft ÷ target pass", "{c_value}",
     "Median one-token draft pass over the median one-token target pass, both measured."),
    ("Verify ÷ target pass", "{r.verify_cost:.2f}{with_prompt_value}",
     "Scoring γ + 1 = {positions} positions in one pass, against one position.{with_prompt}"),
    ("Predicted speed-up", "{predicted_value}",
     "(1 − α^(γ+1)) / (1 − α) tokens per round ÷ (γ·c + verify cost), from this run's α and costs."),
)  # fmt: skip
SAMPLING_HELPS = {
    "temperature": "0 = greedy: a draft token is kept while it is the target's top token.",
    "top_p": "Applied to p and q alike. 1 = off.",
    "top_k": "Applied to p and q alike. 0 = off.",
    "min_p": "Applied to p and q alike. 0 = off.",
}
URL_CHOICES = {  # a link's values the page takes, and what it says of any other
    "spec_drafter": (drafting.DRAFTERS, T["drafter_url"]),
    "spec_shortlist": (drafting.SHORTLIST_CHOICES, T["shortlist_url"]),
}


def round_sentence(record, token: str) -> str:
    """What one round did; `token` is the round's own token, already escaped for the page."""
    kind = ("greedy_residual" if record.greedy else "residual_kind") if record.token_kind == "residual" else None
    verdict = T[kind or f"{record.token_kind}_kind"].format(n=record.accepted + 1, token=token, drafted=record.drafted)
    unchecked = record.drafted - record.checked
    never = T["never"].format(n=unchecked) if unchecked else ""
    return T["round"].format(r=record, never=never, verdict=verdict, tokens=len(record.new_tokens))


def run_metrics(result) -> list[tuple[str, str, str]]:
    """`METRICS` filled from one comparison."""
    s, alpha, c = result.summary, result.summary.acceptance_rate, result.cost_ratio
    predicted = result.predicted_speedup(measured_verify=True)
    fields = {
        "alpha_value": "–" if alpha is None else f"{alpha:.0%} ({s.accepted} of {s.checked})",
        "unchecked": s.drafted - s.checked,
        "per_drafted": f" Accepted ÷ drafted would be {s.accepted / s.drafted:.0%}." if s.drafted else "",
        "c_value": "≈ 0 (a search)" if c is None else f"{c:.2f}",
        "with_prompt_value": " (with the prompt)" if s.verify_read_prompt else "",
        "with_prompt": T["with_prompt"] if s.verify_read_prompt else "",
        "positions": result.gamma + 1,
        "predicted_value": "–" if predicted is None else f"{predicted:.2f}×",
    }
    return [tuple(part.format(s=s, r=result, **fields) for part in metric) for metric in METRICS]


def run_verdict(result, weight_bytes: int, other_target: str | None = None) -> str:
    """The paragraphs under the theory chart: this run against plain decoding, when speculation wins at these costs,
    why a verify pass costs what it does here, how c was measured, and what the formula leaves out."""
    s, gamma, verify, c, per_round = (
        result.summary,
        result.gamma,
        result.verify_cost,
        result.cost_ratio,
        result.per_round(),
    )
    said = [T["speed"].format(r=result, tokens=s.new_tokens, words=per_round.words(more="faster", less="slower"))]
    if s.verify_read_prompt:
        said.append(T["only_round_0"].format(verify=verify))
    else:
        even, alpha = break_even_alpha(gamma, c or 0.0, verify), s.acceptance_rate
        fields = {
            "gamma": gamma,
            "c": c or 0.0,
            "verify": verify,
            "cost": gamma * (c or 0.0) + verify,
            "most": gamma + 1,
        }
        alpha_text = "none checked" if alpha is None else f"{alpha:.0%}"
        said += [T["never_wins" if even is None else "break_even"].format(**fields, even=even, alpha=alpha_text)]
        why = T["why"].format(positions=gamma + 1, verify=verify, words=result.verify_against_one().words())
        where = {True: "fits", False: "does_not_fit"}.get(machine.weights_fit_in_cache(weight_bytes))
        cache = machine.describe_bytes(machine.last_level_cache_bytes())
        why += T[where].format(weights=machine.describe_bytes(weight_bytes), cache=cache) if where else ""
        if not per_round.too_close and per_round.ratio < 1:  # measured slower than plain decoding
            why += T["larger"].format(
                beside=f"compare {md(other_target)} in the sweep below, or " if other_target else ""
            )
        said += [T["temperature"], why]
    draft, plain = result.draft_timing(), result.plain.decode_step
    if c is None:
        said.append(T["c_lookup"])
    elif draft is not None and plain is not None:
        said.append(T["c"].format(c=c, draft=draft.label(), plain=plain.label()))
    predicted = result.predicted_speedup(measured_verify=True)
    if predicted is not None and not s.verify_read_prompt and predicted > result.measured_speedup * 1.1:
        what = "sampling and bookkeeping" if c is not None else "the lookup's search, sampling, books"
        said.append(
            T["overheads"].format(
                r=result, predicted=predicted, overhead=result.overhead_passes_per_round() or 0.0, what=what,
                draw=result.draw_passes_per_token(), charged=result.predicted_speedup(overheads=True),
            )
        )  # fmt: skip
    return "\n\n".join(said)


def sweep_findings(table: pd.DataFrame) -> str:
    """One side of the sweep: mean α per temperature, how many runs measured above 1 and where, its extremes, c."""
    per_t = table.groupby("temperature")["alpha"].mean().dropna()
    won = table[table.measured_speedup > 1].groupby("temperature")["gamma"]
    where = "; ".join(
        f"temperature {t:g}: " + (", ".join(f"γ = {int(g)}" for g in won.get_group(t)) if t in won.groups else "none")
        for t in sorted(table.temperature.unique())
    )
    said = [
        T["mean_alpha"].format(per_t=", ".join(f"**{a:.0%}** at temperature {t:g}" for t, a in per_t.items())),
        T["won"].format(won=int((table.measured_speedup > 1).sum()), runs=len(table), where=where),
        T["best_worst"].format(
            best=table.loc[table.measured_speedup.idxmax()], worst=table.loc[table.measured_speedup.idxmin()]
        ),
    ]
    costs = table["cost_ratio"].dropna()
    if len(costs):
        said.append(T["c_range"].format(low=costs.min(), high=costs.max(), median=costs.median()))
    return "\n\n".join(said)


def both_sides(table: pd.DataFrame) -> str:
    """Over a sweep on two targets: each one's weights, verify cost and runs, then the two compared on their runs."""
    sides = list(table.groupby("target", sort=False))
    if len(sides) < 2:
        return ""
    parts = "; ".join(
        T["side_part"].format(target=md(name), weights=machine.describe_bytes(int(runs.weight_bytes.iloc[0])),
                              verify=runs.verify_cost.median(), speedup=runs.measured_speedup.median(),
                              best=runs.measured_speedup.max())
        for name, runs in sides
    )  # fmt: skip
    (a, a_runs), (b, b_runs) = sides[:2]
    verify_words = compare(a_runs.verify_cost.tolist(), b_runs.verify_cost.tolist()).words()
    speed_words = compare(a_runs.measured_speedup.tolist(), b_runs.measured_speedup.tolist()).words("higher", "lower")
    return T["sides"].format(parts=parts, a=md(a), b=md(b), verify_words=verify_words, speed_words=speed_words)


def why_they_differ(a, b, cache: int | None = None) -> str:
    """Two models' verify costs (`comparison.VerifyCost`), compared pass by pass, and where their weights sit."""
    cache = machine.last_level_cache_bytes() if cache is None else cache
    ratios = [[m / o for m, o in zip(side.many.times_ms, side.one.times_ms)] for side in (a, b)]
    words = compare(*ratios).words(more="more of its own one-token passes", less="fewer of its own one-token passes")
    said = T["two_costs"].format(a=a, b=b, words=words)
    if cache is None:
        return said + T["no_cache"]
    fit = {side.name: "fit in" if side.weight_bytes <= cache else "do not fit in" for side in (a, b)}
    return said + T["cache_sides"].format(
        cache=machine.describe_bytes(cache), a=a.name, b=b.name, a_weights=machine.describe_bytes(a.weight_bytes),
        b_weights=machine.describe_bytes(b.weight_bytes), a_fit=fit[a.name], b_fit=fit[b.name],
    )  # fmt: skip


def about_draft(name: str | None) -> str | None:
    """What a bundled draft with a training record is (SmolLM2's), and its measured figures; None for any other."""
    meta = drafting.read_json(name, "training_meta.json")
    if "teacher_text" not in meta:
        return None
    replies, settings = meta["teacher_text"]["replies_trained"], meta["settings"]
    if "heldout_first_guess_agreement" in meta:  # the feature draft
        said = T["about_feature"].format(name=name, shortlist=settings["shortlist"], replies=replies)
    else:
        said = T["about_draft"].format(
            name=name, settings=settings, stats=meta["stats"], params=meta["stats"]["parameters"] / 1e6, replies=replies
        )
    m = drafting.read_json(name, drafting.MEASURED_FILE)
    if m:
        said += T["measured"].format(m=m, story=m["story"], question=m["question"])
        if others := m.get("others"):
            speeds, kept = sorted(o["speedup_vs_plain"] for o in others), sorted(o["acceptance_rate"] for o in others)
            asked = ", ".join(f"“{o['request']}”" for o in others)
            said += T["others"].format(
                n=len(others), asked=asked, low=speeds[0], high=speeds[-1], kept_low=kept[0], kept_high=kept[-1]
            )
    return said
