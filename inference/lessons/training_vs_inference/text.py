"""The sentences of Training vs inference: every number in them passed in from the result it describes."""

from __future__ import annotations

from inference.core.tokens import markdown_token_text
from inference.lessons.training_vs_inference.cost import Memory, StepCost, TrainingBill
from inference.lessons.training_vs_inference.weights import Distribution, InferenceCheck, TensorChange

DEFAULT_SENTENCE = "The little cat sat on the purple moon"


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def pct(p: float) -> str:
    """A probability as a percentage with enough digits to be non-zero: 98.1%, 0.0033%."""
    if p >= 0.01:
        return f"{p:.1%}"
    return f"{p * 100:.2g}%" if p >= 1e-6 else "<0.0001%"


def short(digest: str) -> str:
    return digest[:16]


def inference_sentence(check: InferenceCheck, model_name: str) -> str:
    if check.changed:  # never expected: said plainly if it happens
        return (
            f"⚠️ After {check.passes} forward passes the fingerprint changed (`{short(check.fingerprint_before)}` → "
            f"`{short(check.fingerprint_after)}`): something wrote into the weights."
        )
    return (
        f"**{check.passes} forward passes** of {model_name} over the sentence later, the weights' fingerprint (a SHA-256 "
        f"of every tensor) is still **`{short(check.fingerprint_after)}…`**: all {check.tensors} tensors are equal bit "
        "for bit. Inference only reads the weights."
    )


def token(text: str, markdown: bool = True) -> str:
    """A token in a sentence: bold and shown literally in Markdown, quoted in plain text (a chart's sentence)."""
    return f"**{markdown_token_text(text)}**" if markdown else f"'{text}'"


def prediction_sentence(dist: Distribution, context: str, target: str, markdown: bool = True) -> str:
    rank = int((dist.probs > dist.probs[dist.target_id]).sum()) + 1
    shown = f"*{markdown_token_text(context)}*" if markdown else f"'{context}'"
    return (
        f"After {shown}, the model's most likely next token is {token(dist.top_labels[0], markdown)} "
        f"({float(dist.probs[dist.top_ids[0]]):.1%}); the sentence's own last token {token(target, markdown)} gets "
        f"{pct(dist.target_probability)} (rank {rank:,})."
    )


def training_sentence(
    before: Distribution, after: Distribution, target: str, losses: list[float], changes: list[TensorChange]
) -> str:
    changed = sum(c.bytes_changed for c in changes)
    total = sum(c.bytes_total for c in changes)
    moved = max(changes, key=lambda c: c.relative_change)
    steps = len(losses) - 1
    return (
        f"After **{steps} training step{'s' if steps != 1 else ''}** on this one sentence, "
        f"{token(target)} went from {pct(before.target_probability)} to "
        f"**{pct(after.target_probability)}**, and the loss on the sentence from {losses[0]:.3f} to {losses[-1]:.3f}. "
        f"**{changed:,} of {total:,} bytes** of weights changed; the tensor that moved most, "
        f"`{moved.name}`, moved {moved.relative_change:.2%} of its size."
    )


def gained_sentence(gains: list[tuple[str, float]], markdown: bool = True) -> str:
    if not gains:
        return "No token gained probability."
    parts = ", ".join(f"{token(t, markdown)} +{pct(g)}" for t, g in gains)
    return f"Gained most: {parts}."


def cost_sentence(cost: StepCost) -> str:
    """Plain text (it is the chart's sentence)."""
    return (
        f"On {cost.tokens} tokens a training step took {cost.train_median_ms:,.1f} ms (median of "
        f"{cost.train_step.repeats}), a forward pass {cost.forward_median_ms:,.1f} ms: "
        f"{cost.time_ratio:.1f}×. The FLOPs say {cost.flops_train / cost.flops_forward:.0f}× "
        f"({cost.flops_train_per_token / 1e6:,.1f} M vs {cost.flops_forward_per_token / 1e6:,.1f} M per token, "
        f"about 6N vs 2N with N = {cost.parameters / 1e6:,.2f} M parameters), so the step took "
        f"{cost.time_ratio / (cost.flops_train / cost.flops_forward):.1f}× what its FLOPs alone predict."
    )


def memory_sentence(mem: Memory) -> str:
    """Plain text (it is the chart's sentence)."""
    return (
        f"Inference needs the weights ({mib(mem.weights)}) and a KV cache ({mib(mem.kv_cache)}): "
        f"{mib(mem.inference)}. Training also needs a gradient for every weight ({mib(mem.gradients)}), AdamW's "
        f"two moments ({mib(mem.optimizer_moments)}) and the activations kept for the backward pass "
        f"({mib(mem.activations)}): {mib(mem.training)}, {mem.training / mem.inference:.1f}× as much."
    )


def bill_sentence(bill: TrainingBill) -> str:
    return (
        f"{bill.name} was trained once: **{bill.tokens:,} tokens** in {bill.steps:,} steps, "
        f"**{bill.seconds / 3600:.2f} hours on {bill.cores} CPU cores** ({bill.seconds * bill.cores / 3600:.2f} "
        "core-hours)."
    )


def break_even_sentence(bill: TrainingBill, request_ms: float, prompt: int, reply: int, requests: float) -> str:
    """Plain text (it is the chart's sentence)."""
    return (
        f"One request ({prompt} prompt tokens, {reply} reply tokens) took {request_ms / 1000:.2f} s of one core "
        f"here. After {requests:,.0f} requests inference has cost as much machine time as training did; every "
        "request after that is extra, for as long as the model is used."
    )


def bars_sentence(rows: list[tuple[str, float, float | None]]) -> str:
    """The distribution chart's bars as plain text: each token's probability before (and after) training."""
    if all(r[2] is None for r in rows):
        return "Before training: " + ", ".join(f"'{t}' {pct(b)}" for t, b, _ in rows) + "."
    return "Before → after training: " + ", ".join(f"'{t}' {pct(b)} → {pct(a)}" for t, b, a in rows) + "."


def single_step_sentence(model_name: str, ms: float, tokens: int) -> str:
    return f"One training step of {model_name} on {tokens} tokens took **{ms / 1000:,.1f} s** here (measured)."


def moves_sentence(changes: list[TensorChange]) -> str:
    """The tensor heat map as plain text: the most and least moved tensors and how many moved at all."""
    ranked = sorted(changes, key=lambda c: c.relative_change)
    moved = sum(c.relative_change > 0 for c in changes)
    return (
        f"{moved} of {len(changes)} tensors moved; most {ranked[-1].name} ({ranked[-1].relative_change:.2%} of its "
        f"size), least {ranked[0].name} ({ranked[0].relative_change:.2%})."
    )


def flops_sentence(bill: TrainingBill, flops_requests: float, tokens: int, measured_requests: float | None) -> str:
    """Break-even by FLOPs, and how the measured crossing compares when there is one."""
    sentence = (
        f"By FLOPs alone (6N per training token against 2N per request token), {bill.name}'s training equals "
        f"**{flops_requests:,.0f} requests** of {tokens} tokens."
    )
    if measured_requests is None:
        return sentence
    if measured_requests < flops_requests:
        return sentence + (
            f" Measured, the crossing comes {flops_requests / measured_requests:,.0f}× earlier: a request's passes "
            "here did less arithmetic per second than training on whole batches of text did."
        )
    return sentence + f" Measured, it comes {measured_requests / flops_requests:,.1f}× later."
