"""The sentences of Training vs inference: format strings, each field filled from the result it describes."""

from __future__ import annotations

import statistics

from inference.core.measuring import compare
from inference.core.tokens import markdown_token_text

DEFAULT_SENTENCE = "The little cat sat on the purple moon"

TEXT = {
    "intro": "**Inference** uses a trained model: it reads the weights and never changes them. **Training** made "
    "those weights, one step at a time, each step moving all of them. Training happens once; inference happens on "
    "every request, and that is where most of the cost of real AI goes. Here **{model}** does both, on a sentence "
    "you type.",
    "prediction": "After {context}, the model's most likely next token is {top} ({top_p}); the sentence's own last "
    "token {target} gets {target_p} (rank {rank:,}).",
    "unchanged": "**{passes} forward passes** of {model} over the sentence later, the weights' fingerprint (a SHA-256 "
    "of every tensor) is still **`{after}…`**: all {tensors} tensors are equal bit for bit. Inference only reads the "
    "weights.",
    "changed": "⚠️ After {passes} forward passes the fingerprint changed (`{before}` → `{after}`): something wrote "
    "into the weights.",
    "how_training_works": "A training step runs the same forward pass, measures how wrong it was on every token of "
    "the sentence (the loss: cross entropy), runs backward to get a gradient for every weight, and lets the optimizer "
    "move each weight. Here: this project's own training loop (`inference/training/train.py`: AdamW at its peak "
    "learning rate {lr:g}), on **your own copy** of the model. The copy every visitor shares is never trained, and "
    "nothing is saved.",
    "big_model": "{model} has {millions:,.0f} M parameters: a training step needs a gradient and AdamW's two moments "
    "for each (about four times the weights' memory) and takes seconds on this CPU, so this page takes one measured "
    "step on a copy that is dropped right after.",
    "press_train": "Press **{button}**: the chart will show the same probabilities before and after.",
    "trained": "After **{steps} training step{plural}** on this one sentence, {target} went from {p_before} to "
    "**{p_after}**, and the loss on the sentence from {loss_before:.3f} to {loss_after:.3f}. **{changed:,} of "
    "{total:,} bytes** of weights changed; the tensors moved by {least:.2%} to {most:.2%} of their size (median "
    "{median:.2%}), the most `{moved}`.",
    "gained": "Gained most: {parts}.",
    "no_gain": "No token gained probability.",
    "single_step": "One training step of {model} on {tokens} tokens took **{seconds:,.1f} s** here (measured).",
    "fingerprints": "Your copy's fingerprint is now `{copy}…`; the shared model's is still `{shared}…` ({state}).",
    "reset": "Reset: your copy's fingerprint is `{fingerprint}…` again.",
    "moves": "{moved} of {tensors} tensors moved; most {most} ({most_share:.2%} of its size), least {least} "
    "({least_share:.2%}).",
    "bars_before": "Before training: {bars}.",
    "bars_after": "Before → after training: {bars}.",
    "cost": "On {tokens} tokens a training step took {train_ms:,.1f} ms (median of {repeats}), a forward pass "
    "{forward_ms:,.1f} ms: {step_vs_pass}. The FLOPs say {flops_ratio:.0f}× ({train_mflops:,.1f} M vs "
    "{forward_mflops:,.1f} M per token, about 6N vs 2N with N = {millions:,.2f} M parameters).",
    "memory": "Inference needs the weights ({weights}) and a KV cache ({kv}): {inference}. Training also needs a "
    "gradient for every weight ({gradients}), AdamW's two moments ({moments}) and the activations kept for the "
    "backward pass ({activations}): {training}, {times:.1f}× as much.",
    "bill": "{model} was trained once: **{tokens:,} tokens** in {steps:,} steps, **{hours:.2f} hours on {cores} CPU "
    "cores** ({core_hours:.2f} core-hours).",
    "break_even": "One request ({prompt} prompt tokens, {reply} reply tokens) took {seconds:.2f} s of one core here. "
    "After {requests:,.0f} requests inference has cost as much machine time as training did; every request after that "
    "is extra, for as long as the model is used.",
    "flops": "By FLOPs alone (6N per training token against 2N per request token), {model}'s training equals "
    "**{requests:,.0f} requests** of {tokens} tokens.",
    "flops_measured": " Measured on this machine, the crossing comes {crossing} than the FLOPs say.",
    "first_look_caption": "The model's own probabilities (one forward pass, softmax over all {vocab:,} tokens), and "
    "SHA-256 digests of all {tensors} tensors (parameters and buffers) before and after {passes} forward passes.",
    "trained_caption": "Probabilities from your copy's forward pass after training; bytes compared bit for bit, tensor "
    "by tensor, against the copy's starting weights. AdamW's weight decay shrinks every matrix at every step, so even "
    "the embeddings of tokens not in the sentence change.",
    "loss_caption": "Cross entropy of your copy on the sentence's {tokens} predicted tokens, before each step and after "
    "the last. Each step took {step_ms} ms (measured).",
    "time_caption": "Wall clock on this machine, {threads} torch thread(s), interleaved; bars are medians of {repeats}, "
    "dots each repeat. A training step: loss, backward, gradient clipping, AdamW.",
    "flops_caption": "Forward: 2 × (layer weights + output layer) per token + attention (inference/core/flops.py); "
    "training: 3 × forward (the backward pass is two products per forward product). AdamW's update is left out.",
    "memory_caption": "Weights, gradients (one per trainable weight) and AdamW's two float32 moments counted from the "
    "tensors; the KV cache from the model's shape; activations are the bytes of the tensors autograd kept for the "
    "backward pass of this sentence (measured with saved-tensor hooks).",
    "break_even_caption": "Training: wall time × {cores} cores from its training_meta.json; a request: prefill + "
    "decode passes timed here on {threads} thread(s), × {threads}. Both are machine time, core-hours.",
}


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def pct(p: float) -> str:
    """A probability as a percentage with enough digits to be non-zero: 98.1%, 0.0033%."""
    if p >= 0.01:
        return f"{p:.1%}"
    return f"{p * 100:.2g}%" if p >= 1e-6 else "<0.0001%"


def short(digest: str) -> str:
    return digest[:16]


def token(text: str) -> str:
    """A token in a sentence: bold and shown literally in Markdown."""
    return f"**{markdown_token_text(text)}**"


def first_look(before, check, context: str, target: str, top: str, model: str) -> str:
    """The prediction before training and what `check`'s forward passes did to the fingerprint."""
    fields = dict(
        context=f"*{markdown_token_text(context)}*",
        top=token(top),
        top_p=f"{float(before.probs[before.top_ids[0]]):.1%}",
        target=token(target),
        target_p=pct(before.target_probability),
        rank=int((before.probs > before.probs[before.target_id]).sum()) + 1,
        passes=check.passes,
        before=short(check.fingerprint_before),
        after=short(check.fingerprint_after),
        model=model,
        tensors=check.tensors,
    )
    return (TEXT["prediction"] + " " + TEXT["changed" if check.changed else "unchanged"]).format(**fields)


def trained(before, result, target: str) -> str:
    shares = sorted(c.relative_change for c in result.changes)
    steps = len(result.losses) - 1
    return TEXT["trained"].format(
        steps=steps,
        plural="s" * (steps != 1),
        target=token(target),
        p_before=pct(before.target_probability),
        p_after=pct(result.after.target_probability),
        loss_before=result.losses[0],
        loss_after=result.losses[-1],
        changed=sum(c.bytes_changed for c in result.changes),
        total=sum(c.bytes_total for c in result.changes),
        least=shares[0],
        most=shares[-1],
        median=statistics.median(shares),
        moved=max(result.changes, key=lambda c: c.relative_change).name,
    )


def gained(rises: list[tuple[str, float]]) -> str:
    parts = ", ".join(f"{token(t)} +{pct(g)}" for t, g in rises)
    return TEXT["gained" if rises else "no_gain"].format(parts=parts)


def bars(rows: list[tuple[str, float, float | None]]) -> str:
    """The distribution chart's bars as plain text: each token's probability before (and after) training."""
    if all(r[2] is None for r in rows):
        return TEXT["bars_before"].format(bars=", ".join(f"'{t}' {pct(b)}" for t, b, _ in rows))
    return TEXT["bars_after"].format(bars=", ".join(f"'{t}' {pct(b)} → {pct(a)}" for t, b, a in rows))


def moves(changes) -> str:
    """The tensor heat map as plain text: the most and least moved tensors and how many moved at all."""
    ranked = sorted(changes, key=lambda c: c.relative_change)
    return TEXT["moves"].format(
        moved=sum(c.relative_change > 0 for c in changes),
        tensors=len(changes),
        most=ranked[-1].name,
        most_share=ranked[-1].relative_change,
        least=ranked[0].name,
        least_share=ranked[0].relative_change,
    )


def cost(c) -> str:
    """Plain text (it is the chart's sentence)."""
    return TEXT["cost"].format(
        tokens=c.tokens,
        train_ms=c.train_step.median_ms,
        repeats=c.train_step.repeats,
        forward_ms=c.forward.median_ms,
        step_vs_pass=compare(c.train_step, c.forward).words(more="longer", less="shorter"),
        flops_ratio=c.flops_train / c.flops_forward,
        train_mflops=c.flops_train_per_token / 1e6,
        forward_mflops=c.flops_forward_per_token / 1e6,
        millions=c.parameters / 1e6,
    )


def memory(m) -> str:
    """Plain text (it is the chart's sentence)."""
    parts = dict(weights=m.weights, kv=m.kv_cache, gradients=m.gradients, moments=m.optimizer_moments)
    parts.update(activations=m.activations, inference=m.inference, training=m.training)
    return TEXT["memory"].format(times=m.training / m.inference, **{k: mib(v) for k, v in parts.items()})


def bill(b) -> str:
    hours = b.seconds / 3600
    return TEXT["bill"].format(
        model=b.name, tokens=b.tokens, steps=b.steps, hours=hours, cores=b.cores, core_hours=hours * b.cores
    )


def flops(b, flops_requests: float, tokens: int, measured_requests: float | None) -> str:
    """Break-even by FLOPs, and how the measured crossing compares when there is one."""
    sentence = TEXT["flops"].format(model=b.name, requests=flops_requests, tokens=tokens)
    if measured_requests is None:
        return sentence
    crossing = compare(flops_requests, measured_requests).words(more="earlier", less="later")
    return sentence + TEXT["flops_measured"].format(crossing=crossing)
